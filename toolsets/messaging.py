"""The messaging toolset: which surfaces are up, delivery receipts, and messages to the current user.

The assistant can only ever write to the person it is talking to, in the chat it is talking in; any
other recipient is refused here, before the gateway sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.outbox import Outbox
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "messaging",
    "surface status, delivery receipts, separate messages to the user",
    keywords=(
        r"\b(?:telegram|slack|console|surfaces?|platforms?)\b", r"\bnotif(?:y|ication)s?\b", r"\bdeliver(?:ed|y)\b",
        r"\bseparate(?:ly)?\b",
        r"\b(?:are|is|still|you(?:'re| are)?)\b(?: \w{1,20}){0,3} (?:online|connected|reachable)\b",
        r"\b(?:go|get|got|went|gone) through\b(?! (?:my|the|all|these|those|this|it|them|each|every)\b)",
        r"\bdid you send\b", r"\bdidn'?t (?:get|receive)\b", r"\bsend (?:me )?(?:a )?message\b",
        r"\b(?:message me|ping me|text me)\b(?! (?:at|in|every|each|tomorrow|tonight|on)\b)", r"消息", r"通知",
        r"送达", r"收到", r"发给我", r"发出", r"在线", r"平台",
    ),
)

def _text(text: str) -> str:
    if not text.strip():
        raise ToolError("text is empty; give the message to send")
    return text


@TOOLSET.tool()
async def messaging_status(ctx: ToolContext) -> dict[str, Any]:
    """Which chat surfaces (telegram, slack, console) are up, and which one this chat is on."""
    surfaces = ctx.service("surfaces")
    if not isinstance(surfaces, Mapping):
        raise ToolError("surface status is not available in this runtime")
    return {"surfaces": dict(surfaces), "this_chat": ctx.origin.surface}


@TOOLSET.tool()
async def message_receipt(ctx: ToolContext, message_id: int) -> dict[str, Any]:
    """Delivery state of a message you sent in this chat (pending, sent or failed).

    Args:
        message_id: Id returned by notify_user or send_message.
    """
    item = await Outbox(ctx.store).get(message_id)
    here = (ctx.origin.surface, ctx.origin.chat_id)
    # Rows of other chats are reported exactly like missing ones, so ids reveal nothing about others.
    if item is None or (item.outbound.origin.surface, item.outbound.origin.chat_id) != here:
        raise ToolError(f"message {message_id} not found in this chat")
    receipt = item.model_dump(include={"id", "state", "attempts", "sent_at", "error"}, exclude_none=True)
    return {"message_id": receipt.pop("id"), **receipt}


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def notify_user(ctx: ToolContext, text: str) -> dict[str, Any]:
    """Send the user a separate message now, apart from your reply (it notifies their phone).

    Args:
        text: The message.
    """
    return {"message_id": await ctx.send(_text(text)), "state": "pending"}


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def send_message(ctx: ToolContext, text: str, to: str = "user") -> dict[str, Any]:
    """Send a message to the current user in this chat. No other recipients are possible.

    Args:
        text: The message.
        to: "user" or "origin" (this chat).
    """
    if to not in ("user", "origin", ctx.origin.chat_id):
        raise ToolError(
            f"cannot send to {to!r}: send_message only reaches the current user in this chat "
            "(to='user' or 'origin'). Tell the user you cannot message other people."
        )
    return {"message_id": await ctx.send(_text(text)), "state": "pending"}
