"""Slack payloads as Slack sends them (event callbacks, block_actions) and signed HTTP-mode requests,
for the Slack surface tests."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp

from gateway.surfaces.slack import SlackSurface
from tests.fixtures.slack import BOT_USER_ID

SECRET = "signing-secret"
BOT_TOKEN = "xoxb-test"
APP_TOKEN = "xapp-test"
OWNER = "UOWNER"
STRANGER = "USTRANGER"


def event_body(event: dict[str, Any], event_id: str = "Ev1") -> dict[str, Any]:
    return {"token": "legacy", "team_id": "T0001", "api_app_id": "A0001", "type": "event_callback",
            "event_id": event_id, "event_time": int(time.time()), "event": event}


def dm(text: str, ts: str = "1710000000.000100", user: str = OWNER, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "channel": "D0001", "channel_type": "im", "user": user, "text": text, "ts": ts,
            **extra}


def mention(text: str, ts: str = "1710000000.000200", **extra: Any) -> dict[str, Any]:
    return {"type": "app_mention", "channel": "C0001", "user": OWNER, "text": f"<@{BOT_USER_ID}> {text}", "ts": ts,
            **extra}


def press_body(user: str, action_id: str = "anyy_approve_0", value: str = "ap-1",
               thread_ts: str | None = "1710000000.000200") -> dict[str, Any]:
    message = {"type": "message", "ts": "1700000000.000900", "text": "Send it?", "bot_id": "BBOT"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {"type": "block_actions", "user": {"id": user}, "team": {"id": "T0001"}, "api_app_id": "A0001",
            "container": {"type": "message", "channel_id": "C0001", "message_ts": message["ts"]},
            "channel": {"id": "C0001"}, "message": message, "trigger_id": "1.2.3",
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                         "action_ts": "1700000001.0"}]}


async def post_signed(surface: SlackSurface, body: str, content_type: str, *, secret: str = SECRET,
                      retry: int | None = None, timestamp: int | None = None) -> aiohttp.ClientResponse:
    ts = str(timestamp if timestamp is not None else int(time.time()))
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}
    if retry is not None:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
    async with aiohttp.ClientSession() as session:
        response = await session.post(f"http://127.0.0.1:{surface.http_port}/slack/events", data=body,
                                      headers=headers)
        await response.read()
        return response


async def post_event(surface: SlackSurface, event: dict[str, Any], **kwargs: Any) -> aiohttp.ClientResponse:
    event_id = kwargs.pop("event_id", "Ev1")
    return await post_signed(surface, json.dumps(event_body(event, event_id)), "application/json", **kwargs)


async def post_press(surface: SlackSurface, body: dict[str, Any]) -> aiohttp.ClientResponse:
    form = urlencode({"payload": json.dumps(body)})
    return await post_signed(surface, form, "application/x-www-form-urlencoded")

