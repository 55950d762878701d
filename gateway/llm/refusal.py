"""A model's refusal, said in words, and the refused exchange left out of what is sent next.

OpenAI's models put a refusal in the message's `refusal` field (streamed as `delta.refusal`) with no
content; Anthropic's end the reply with `stop_reason: "refusal"`, the text so far cut off, and document
that the refused turn must be removed from the conversation before continuing, or the next request is
refused again. The owner sees what happened; the stored exchange stays in the store (and searchable).
"""

from __future__ import annotations

from gateway.llm.types import ChatMessage

PREFIX = "⚠️ the model declined: "


def declined(reason: str) -> str:
    """What the owner sees for a refusal."""
    return PREFIX + (reason.strip() or "it gave no reason")


def without_refused(messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` without each refused exchange: the refused assistant message and everything back to
    (and including) the user message that asked for it."""
    if not any(m.refused for m in messages):  # the usual case: one pass, no copy
        return messages
    kept: list[ChatMessage] = []
    for m in messages:
        if not m.refused:
            kept.append(m)
            continue
        while kept and kept[-1].role != "user":
            kept.pop()
        if kept:
            kept.pop()  # the message that asked
    return kept
