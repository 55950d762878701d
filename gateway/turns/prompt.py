"""The system prompt (who the assistant is, the owner's instructions, the user's memory) and the turn's
context (the owner's current local time, the chat surface, the skills matched to this message).

Providers cache a request's longest prefix seen before (OpenAI, DeepSeek and Gemini by themselves,
Anthropic at the breakpoints `gateway.llm.anthropic` sets), so what changes from turn to turn must come
after the history, not before it: the system prompt holds only what stays the same, and the turn's
context rides on the turn's own user message, in the request only (the stored row is the person's words).
A clock in the system prompt would make every request after a minute a miss over the whole history.
"""

from __future__ import annotations

from datetime import datetime

from gateway.llm.types import ChatMessage
from toolsets.untrusted import PROMPT_RULE

BASE = (
    "You are Anyy, a personal assistant that lives in the owner's chat apps. Be brief: replies are read on a "
    "phone. Use tools when they help; when a tool says it is awaiting approval, tell the user what you asked "
    "for and stop — the outcome arrives later as an [event]. Never invent tool results. If a tool you need "
    "is not listed, call load_toolsets. The newest user message's text ends with a <context> block that Anyy "
    "adds (the current time, the chat surface, skills that may help); the user did not write it. " + PROMPT_RULE
)


def system_prompt(memory: str = "", instructions: str = "") -> ChatMessage:
    """The system message: the same from turn to turn until the instructions or the memory change."""
    parts = [BASE]
    if instructions:
        parts.append(instructions.strip())
    if memory:
        parts.append(memory)
    stable = "\n\n".join(parts)
    return ChatMessage(role="system", content=stable, stable_chars=len(stable))


def turn_context(now: datetime, surface: str, skills: str = "") -> str:
    """What a turn knows that the next one will not share: the time, the surface, the matched skills."""
    lines = [f"Current time: {now:%A %Y-%m-%d %H:%M} ({now.tzinfo}). Chat surface: {surface}."]
    if skills:
        lines.append(skills)
    return "<context>\n" + "\n\n".join(lines) + "\n</context>"


def with_turn_context(convo: list[ChatMessage], context: str) -> list[ChatMessage]:
    """`convo` with `context` after the newest user message's text (a copy: messages are frozen and the
    history window's own). Without a user message it goes at the end of the system message."""
    for i in range(len(convo) - 1, -1, -1):
        if convo[i].role == "user":
            message = convo[i]
            text = f"{message.content}\n\n{context}" if message.content else context
            return [*convo[:i], message.model_copy(update={"content": text}), *convo[i + 1:]]
    if convo and convo[0].role == "system":
        system = convo[0]
        return [system.model_copy(update={"content": f"{system.content}\n\n{context}"}), *convo[1:]]
    return [ChatMessage(role="system", content=context), *convo]
