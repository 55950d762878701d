"""What names an automation: its short random id and its cleaned label."""

from __future__ import annotations

import base64
import secrets

from toolsets.limits import NAME_CHARS
from toolsets.schedule import AutomationError


def new_automation_id() -> str:
    """Eight lowercase base32 characters: short enough to type in /cancel, 40 random bits."""
    return base64.b32encode(secrets.token_bytes(5)).decode().lower()


def clean_name(name: str) -> str:
    """`name` with its spaces collapsed; refused when empty or longer than a short label."""
    cleaned = " ".join(name.split())
    if not cleaned:
        raise AutomationError("an automation needs a name")
    if len(cleaned) > NAME_CHARS:
        raise AutomationError(f"a name is a short label: at most {NAME_CHARS} characters (this one has {len(cleaned)})")
    return cleaned
