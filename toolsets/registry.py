"""Every toolset the runtime knows, in a stable order. Adding a toolset is one line here."""

from __future__ import annotations

from toolsets import artifact
from toolsets import automation
from toolsets import browser
from toolsets import calendar
from toolsets import computer_use
from toolsets import email
from toolsets import file
from toolsets import media_generation
from toolsets import terminal
from toolsets import tts
from toolsets import clarify, memory, messaging, sessions, tasks
from toolsets import skills
from toolsets import subagents
from toolsets import web
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
