"""Bounds on what enters a turn: tool-call arguments from the model and message text from a surface.

Anything past a bound becomes an error the model or the person can read, never an exception that ends
the turn: a deeply nested argument would otherwise raise RecursionError in validation, and a lone
surrogate (valid in a Python string, not in UTF-8) would raise UnicodeEncodeError wherever the value
is hashed, audited or stored. docs/limits.md lists every bound.
"""

from __future__ import annotations

import json
import re
from typing import Any

ARGUMENTS_CHARS = 2_000_000  # a whole call's JSON text
STRING_CHARS = 1_000_000  # any one string in it: a long email body or a file_write fits, a runaway does not
NESTING_DEPTH = 32  # objects and arrays inside each other; real tool schemas need fewer than 6
INBOUND_CHARS = 32_000  # one message from a person (Telegram allows 4096, Slack about 40 000)

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class ArgumentError(ValueError):
    """Tool arguments outside the bounds; the message says which bound and where."""


def parse_arguments(text: str | None) -> dict[str, Any]:
    """The JSON object of a tool call's arguments, checked against the bounds above.

    Raises ArgumentError (a ValueError) with a message meant for the model.
    """
    text = text or "{}"
    if len(text) > ARGUMENTS_CHARS:
        raise ArgumentError(f"the arguments are {len(text)} characters; the limit is {ARGUMENTS_CHARS}")
    try:
        value = json.loads(text)
    except RecursionError:  # json's own parser gives up near the interpreter's recursion limit
        raise ArgumentError(f"the arguments nest deeper than {NESTING_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ArgumentError("arguments must be a JSON object")
    _check(value)
    return value


def _check(root: dict[str, Any]) -> None:
    """Walk the parsed value without recursion: depth, string sizes, UTF-8 validity."""
    stack: list[tuple[Any, int, str]] = [(root, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            _check_string(value, path or "(arguments)")
        elif isinstance(value, dict | list):
            if depth > NESTING_DEPTH:
                raise ArgumentError(f"{path or '(arguments)'}: nested deeper than {NESTING_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str):
                    _check_string(key, f"{path or '(arguments)'} key {key[:40]!r}")
                stack.append((item, depth + 1, where))


def _check_string(value: str, where: str) -> None:
    if len(value) > STRING_CHARS:
        raise ArgumentError(f"{where}: a string of {len(value)} characters; the limit is {STRING_CHARS}")
    bad = _SURROGATE.search(value)
    if bad:
        raise ArgumentError(f"{where}: invalid Unicode (a lone surrogate U+{ord(bad.group()):04X} at character "
                            f"{bad.start()}); send text as valid UTF-8")


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate written as a JSON ``\\uXXXX`` escape.

    For the arguments text a provider sent: storing it stays possible (SQLite takes only UTF-8), and
    parsing it again brings back the same surrogate, which `parse_arguments` then reports to the model.
    """
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def replace_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (for text that is only shown and stored)."""
    return _SURROGATE.sub("\ufffd", text)


def inbound_too_long(text: str) -> str | None:
    """The reply to a message over INBOUND_CHARS, or None when it is within the bound."""
    if len(text) <= INBOUND_CHARS:
        return None
    return (f"That message is {len(text)} characters long; I take at most {INBOUND_CHARS}. "
            "Send it as a file attachment, or in shorter parts.")
