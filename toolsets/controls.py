"""Characters that change how text looks without being seen, made visible.

A terminal obeys escape sequences (`ESC[2K` erases the line, `\\r` returns to its start), so
`rm -f FILE # ESC[2K\\r$ ls -la` would display as `$ ls -la`; bidirectional overrides and zero-width
characters reorder or hide text in any chat client. Wherever the owner must see exactly what will run
(every approval preview, everything the console prints), each such character is shown as its escape:
`\\x1b`, `\\r`, `\\u202e`. Line breaks and tabs stay as they are.
"""

from __future__ import annotations

import re

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x00": "\\0"}


def visible(text: str) -> str:
    """`text` with every control, format and bidirectional character replaced by its escape."""
    return _INVISIBLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
