"""The system prompt: who the assistant is, the owner's current local time, and the user's memory."""

from __future__ import annotations

from datetime import datetime

from toolsets.untrusted import PROMPT_RULE

BASE = (
    "You are Anyy, a personal assistant that lives in the owner's chat apps. Be brief: replies are read on a "
    "phone. Use tools when they help; when a tool says it is awaiting approval, tell the user what you asked "
    "for and stop — the outcome arrives later as an [event]. Never invent tool results. If a tool you need "
    "is not listed, call load_toolsets. " + PROMPT_RULE
)


def system_prompt(now: datetime, surface: str, memory: str = "", instructions: str = "", skills: str = "") -> str:
    parts = [BASE]
    if instructions:
        parts.append(instructions.strip())
    if memory:
        parts.append(memory)
    if skills:
        parts.append(skills)
    parts.append(f"Current time: {now:%A %Y-%m-%d %H:%M} ({now.tzinfo}). Chat surface: {surface}.")
    return "\n\n".join(parts)
