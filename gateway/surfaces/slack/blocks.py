"""Block Kit for messages with buttons, and the way back from a pressed button to its action.

A button's `action_id` is `anyy_<action>_<index>` (unique within the message, as Slack requires) and its
`value` is the opaque value the gateway gave (an approval id, a clarify option); nothing else is trusted
from a press.
"""

from __future__ import annotations

import re
from typing import Any

from store.records import Button

ACTION_ID = re.compile(r"^anyy_(approve|deny|clarify|admit|ignore|allow_today)_\d+$")
SECTION_LIMIT = 3000  # Slack's limit for a section block's text
_LABEL_LIMIT = 75  # Slack's limit for a button's text
_PER_ACTIONS_BLOCK = 25  # Slack's limit of elements in one actions block
_STYLES = {"approve": "primary", "deny": "danger", "admit": "primary"}


def message_blocks(text: str, buttons: list[Button], *, plain: bool = False) -> list[dict[str, Any]]:
    """A section with the text (mrkdwn, or `plain` text that Slack shows exactly as written), then the
    buttons in actions blocks (none when `buttons` is empty: an edit without buttons removes them)."""
    kind = {"type": "plain_text", "text": text, "emoji": False} if plain else {"type": "mrkdwn", "text": text}
    blocks: list[dict[str, Any]] = [{"type": "section", "text": kind}]
    elements = [_button(b, i) for i, b in enumerate(buttons)]
    for start in range(0, len(elements), _PER_ACTIONS_BLOCK):
        blocks.append({"type": "actions", "elements": elements[start:start + _PER_ACTIONS_BLOCK]})
    return blocks


def _button(button: Button, index: int) -> dict[str, Any]:
    label = button.label if len(button.label) <= _LABEL_LIMIT else button.label[:_LABEL_LIMIT - 1] + "…"
    element: dict[str, Any] = {
        "type": "button",
        "action_id": f"anyy_{button.action}_{index}",
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": button.value,
    }
    if button.action in _STYLES:
        element["style"] = _STYLES[button.action]
    return element


def pressed_action(action_id: str) -> str | None:
    """The gateway action ("approve" | "deny" | "clarify" | "admit" | "ignore") a button's action_id stands for."""
    match = ACTION_ID.match(action_id)
    return match.group(1) if match else None
