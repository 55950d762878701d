"""Every toolset the runtime knows, in a stable order. Adding a toolset is one line here."""

from __future__ import annotations

from toolsets import (
    artifact,
    automation,
    browser,
    calendar,
    clarify,
    computer_use,
    email,
    file,
    media_generation,
    memory,
    messaging,
    sessions,
    skills,
    subagents,
    tasks,
    terminal,
    tts,
    web,
)
from toolsets.base import Tool, Toolset

TOOLSETS: list[Toolset] = [
    sessions.TOOLSET,
    memory.TOOLSET,
    tasks.TOOLSET,
    automation.TOOLSET,
    messaging.TOOLSET,
    clarify.TOOLSET,
    calendar.TOOLSET,
    email.TOOLSET,
    skills.TOOLSET,
    subagents.TOOLSET,
    web.TOOLSET,
    browser.TOOLSET,
    file.TOOLSET,
    terminal.TOOLSET,
    computer_use.TOOLSET,
    artifact.TOOLSET,
    tts.TOOLSET,
    media_generation.TOOLSET,
]


def all_tools() -> dict[str, Tool]:
    return {t.name: t for ts in TOOLSETS for t in ts.tools}


def toolset(name: str) -> Toolset | None:
    return next((ts for ts in TOOLSETS if ts.name == name), None)
