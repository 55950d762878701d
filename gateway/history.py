"""The bounded context: the most recent whole turns of a session that fit the character budget.

Turns are dropped whole from the oldest end, so a tool call is never separated from its result and a
session that lasts months costs the same per request as a new one. Everything stays in the store.
"""

from __future__ import annotations

from itertools import groupby

from gateway.llm.types import ChatMessage
from store.records import MessageRecord

def to_chat(msg: MessageRecord) -> ChatMessage:
    """One stored message as the model sees it. Events (approval outcomes, late notices) are shown as
    bracketed user-side notes, which every provider accepts after a tool result."""
    if msg.role == "event":
        return ChatMessage(role="user", content=f"[event] {msg.content}")
    if msg.role == "tool":
        return ChatMessage(role="tool", content=msg.content, tool_call_id=msg.tool_call_id, name=msg.tool_name)
    if msg.role == "assistant":
        return ChatMessage(role="assistant", content=msg.content, tool_calls=msg.tool_calls)
    return ChatMessage(role="user", content=msg.content)


def _size(msg: MessageRecord) -> int:
    return len(msg.content) + sum(len(c.arguments) + len(c.name) for c in msg.tool_calls) + 20


def fit_history(messages: list[MessageRecord], budget_chars: int) -> list[ChatMessage]:
    """Keep the newest whole turns whose total size fits `budget_chars` (the newest turn is always
    kept, even when it alone is larger)."""
    turns = [list(g) for _, g in groupby(messages, key=lambda m: m.turn_id)]
    kept: list[list[MessageRecord]] = []
    used = 0
    for turn in reversed(turns):
        size = sum(_size(m) for m in turn)
        if kept and used + size > budget_chars:
            break
        kept.append(turn)
        used += size
    out = [to_chat(m) for turn in reversed(kept) for m in turn]
    return _drop_orphans(out)


def _drop_orphans(msgs: list[ChatMessage]) -> list[ChatMessage]:
    """Drop tool results whose call is not in view and calls whose results are missing (a turn cut by
    a crash), so every provider's wire format stays valid."""
    called = {c.id for m in msgs for c in m.tool_calls}
    answered = {m.tool_call_id for m in msgs if m.role == "tool"}
    out: list[ChatMessage] = []
    for m in msgs:
        if m.role == "tool" and m.tool_call_id not in called:
            continue
        if m.tool_calls:
            calls = [c for c in m.tool_calls if c.id in answered]
            if not calls and not m.content:
                continue
            m = m.model_copy(update={"tool_calls": calls})
        out.append(m)
    return out
