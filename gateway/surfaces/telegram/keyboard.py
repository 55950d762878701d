"""Buttons as Telegram inline keyboards, and presses back to (action, value).

Telegram limits callback data to 64 bytes, so a button carries a one-letter action code and a short
value: "a:<approval id>", "d:<approval id>", "p:<pairing code>" (admit), "i:<pairing code>" (ignore),
"b:<day>" (allow today: the budget),
and for a clarifying question "c:<index>", whose option text is read back from the pressed message's
own keyboard (the label is the option).
"""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from store.records import Button

MAX_CALLBACK_BYTES = 64
_CODES = {"approve": "a", "deny": "d", "clarify": "c", "admit": "p", "ignore": "i", "allow_today": "b"}
_ACTIONS = {code: action for action, code in _CODES.items()}


def keyboard(buttons: list[Button]) -> InlineKeyboardMarkup | None:
    """The inline keyboard for `buttons`: decisions side by side in one row, each clarify option on a
    row of its own (option texts are longer). Raises ValueError for a button Telegram cannot carry."""
    if not buttons:
        return None
    decisions: list[InlineKeyboardButton] = []
    options: list[list[InlineKeyboardButton]] = []
    for index, button in enumerate(buttons):
        code = _CODES.get(button.action)
        if code is None:
            raise ValueError(f"unknown button action {button.action!r}")
        data = f"c:{index}" if code == "c" else f"{code}:{button.value}"
        if len(data.encode()) > MAX_CALLBACK_BYTES:
            raise ValueError(f"button value too long for Telegram callback data ({len(data.encode())} bytes)")
        key = InlineKeyboardButton(button.label, callback_data=data)
        if code == "c":
            options.append([key])
        else:
            decisions.append(key)
    return InlineKeyboardMarkup(([decisions] if decisions else []) + options)


def decode(data: str, markup: InlineKeyboardMarkup | None) -> tuple[str, str] | None:
    """(action, value) for pressed callback data, or None when it is not ours or can no longer be
    resolved (a clarify option whose message no longer shows its keyboard)."""
    code, sep, value = data.partition(":")
    action = _ACTIONS.get(code)
    if not sep or not value or action is None:
        return None
    if action != "clarify":
        return action, value
    for row in markup.inline_keyboard if markup else ():
        for key in row:
            if key.callback_data == data:
                return action, key.text
    return None
