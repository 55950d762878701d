"""The system prompt: who the assistant is, the owner's current local time, and the user's memory."""

from __future__ import annotations

from datetime import datetime

from gateway.llm.types import ChatMessage
from toolsets.untrusted import PROMPT_RULE

BASE = (
    "You are Anyy, a personal assistant that lives in the owner's chat apps. Be brief: replies are read on a "
    "phone. Use tools when they help; when a tool says it is awaiting approval, tell the user what you asked "
    "for and stop — the outcome arrives later as an [event]. Never invent tool results. If a tool you need "
    "is not listed, call load_toolsets. " + PROMPT_RULE
)


def system_prompt(now: datetime, surface: str, memory: str = "", instructions: str = "",
                  skills: str = "") -> ChatMessage:
    """The system message. What stays the same from turn to turn comes first; the skills matched to this
    message and the current time come last, so prompt caches keep the stable prefix (`stable_chars`)."""
    parts = [BASE]
    if instructions:
        parts.append(instructions.strip())
    if memory:
        parts.append(memory)
    stable = "\n\n".join(parts)
    volatile = f"Current time: {now:%A %Y-%m-%d %H:%M} ({now.tzinfo}). Chat surface: {surface}."
    if skills:
        volatile = f"{skills}\n\n{volatile}"
    return ChatMessage(role="system", content=f"{stable}\n\n{volatile}", stable_chars=len(stable))
