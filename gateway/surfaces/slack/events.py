"""Slack payloads to records: message events to `Inbound`, block_actions presses to their parts.

Which messages become turns: direct messages (`message` events with channel_type "im") and mentions of
the bot in channels (`app_mention`). The bot's own messages, other bots', and edits/deletions/joins
(any subtype other than a plain message with files or a thread broadcast) are not turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.surfaces.slack.blocks import pressed_action
from gateway.surfaces.slack.format import from_mrkdwn
from store.records import Attachment, Inbound, Origin

SURFACE = "slack"
COMMAND = "/anyy"  # the one slash command the app registers (docs/slack.md's manifest)
_TURN_SUBTYPES = {None, "file_share", "thread_broadcast"}


def is_turn(event: dict[str, Any], bot_user_id: str) -> bool:
    """Whether a `message` / `app_mention` event is a person talking to the bot."""
    if event.get("type") == "message" and event.get("channel_type") != "im":
        return False  # channel chatter arrives only if someone subscribed to it; mentions are the way in
    if event.get("subtype") not in _TURN_SUBTYPES or event.get("bot_id") or event.get("bot_profile"):
        return False
    user = event.get("user")
    return bool(user) and user != bot_user_id and bool(event.get("channel")) and bool(event.get("ts"))


def dedupe_key(event: dict[str, Any]) -> str:
    """One key per Slack message, so the `message` and `app_mention` events for the same message, Slack's
    retries and Socket Mode redeliveries (each a new envelope, possibly a new event_id) are one turn."""
    return f"slack:msg:{event['channel']}:{event['ts']}"


def to_inbound(event: dict[str, Any], bot_user_id: str, attachments: list[Attachment]) -> Inbound:
    """The `Inbound` for a turn event (see `is_turn`). A channel mention outside a thread starts a thread
    at that message, so the conversation (a session) and its replies stay there."""
    channel, ts = str(event["channel"]), str(event["ts"])
    is_dm = event.get("channel_type") == "im" or channel.startswith("D")
    mention = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")
    text = from_mrkdwn(mention.sub("", str(event.get("text") or ""))).strip()
    return Inbound(
        surface=SURFACE,
        chat_id=channel,
        user_id=str(event["user"]),
        text=re.sub(r"[ \t]{2,}", " ", text),
        thread_id=event.get("thread_ts") or (None if is_dm else ts),
        is_group=not is_dm,
        attachments=attachments,
        platform_message_id=ts,
    )


def command_inbound(body: dict[str, Any]) -> tuple[Inbound, str] | None:
    """`/anyy approve ID` as the Inbound `/approve ID` (`/anyy` alone: `/help`) with its dedupe key, or
    None for a payload without a user or channel. Slack sends each invocation once, with its own
    trigger_id; the key makes a Socket Mode redelivery of the same envelope one turn."""
    user, channel = body.get("user_id"), body.get("channel_id")
    if not user or not channel:
        return None
    words = str(body.get("text") or "").strip()
    text = from_mrkdwn(words).strip() if words else "help"
    # Typed in a channel, it is answered in the person's direct messages (a user id as channel opens them):
    # the owner's reminders or a stranger's pairing code are never posted where others read.
    chat = str(channel) if str(channel).startswith("D") else str(user)
    inbound = Inbound(surface=SURFACE, chat_id=chat, user_id=str(user), text=f"/{text.removeprefix('/')}",
                      user_name=body.get("user_name"))
    return inbound, f"slack:cmd:{body.get('trigger_id') or f'{channel}:{user}:{words}'}"


@dataclass(frozen=True)
class Press:
    """A button press, as the gateway wants it."""

    user_id: str
    action: str
    value: str
    origin: Origin
    is_group: bool = False  # a channel (one session per user there), not a DM


def to_press(body: dict[str, Any]) -> Press | None:
    """The press in a block_actions payload, or None when the button is not one of ours."""
    actions = body.get("actions") or []
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    user = (body.get("user") or {}).get("id")
    if not actions or not channel or not user:
        return None
    action = pressed_action(str(actions[0].get("action_id", "")))
    if action is None:
        return None
    message = body.get("message") or {}
    thread = message.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
    if thread and thread == message.get("ts"):
        thread = None  # the prompt is itself a thread parent (someone replied to it): it was posted top-level
    return Press(
        user_id=str(user),
        action=action,
        value=str(actions[0].get("value", "")),
        origin=Origin(surface=SURFACE, chat_id=str(channel), thread_id=thread),
        is_group=not str(channel).startswith("D"),
    )
