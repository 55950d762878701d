"""Server-sent events, as both providers stream them: `event:` and `data:` lines, a blank line ends one
event. Only what the two wire formats use is read (no `id:`/`retry:` reconnection: a cut stream is a
failed attempt, never resumed).

Each piece of the stream is scanned once, as it arrives: a line that has not ended yet is kept as the
pieces it came in, never re-scanned, and neither a line nor an event's data may grow past `MAX_EVENT_CHARS`
(`EventTooLarge`). A server sending one endless line costs a megabyte and a linear scan, not the whole
line in memory scanned again at every read.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator

# One line, and one event's data: the largest real event (a tool call's arguments arrive in many small
# deltas; a whole reply in one event is a few kilobytes) is far below it.
MAX_EVENT_CHARS = 1024 * 1024
_LINE_END = re.compile(r"\r\n|\r|\n")


class EventTooLarge(ValueError):
    """A line or an event of the stream is longer than the bound; the message says which."""


async def sse_lines(chunks: AsyncIterable[bytes], max_chars: int = MAX_EVENT_CHARS) -> AsyncIterator[str]:
    """The stream's lines, ended as the SSE format says: CRLF, LF or CR, and nothing else.

    Text's own line splitting (which httpx's `aiter_lines` uses) also breaks at U+2028, U+2029, U+0085
    and a few more, which a provider may send raw inside a JSON string: the data line would be cut in two.
    Raises EventTooLarge for a line longer than `max_chars`.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    open_line: list[str] = []  # the pieces of the line not ended yet
    open_chars = 0
    after_cr = False  # the last piece ended with CR: an LF starting the next one is the rest of a CRLF
    async for chunk in chunks:
        text = decoder.decode(chunk)
        if after_cr and text:
            after_cr = False
            text = text.removeprefix("\n")
        if not text:
            continue
        after_cr = text.endswith("\r")
        # Both providers end lines with LF alone: a plain split is twice as fast as the expression.
        parts = _LINE_END.split(text) if "\r" in text else text.split("\n")
        rest = parts.pop()  # what follows the last line end: the start of a line not ended yet
        if open_chars + len(text) > max_chars:  # only then can a line be over the bound
            _check(parts, rest, open_chars, max_chars)
        if not parts:
            open_line.append(rest)
            open_chars += len(rest)
            continue
        if open_line:
            parts[0] = "".join(open_line) + parts[0]
        for line in parts:
            yield line
        open_line, open_chars = ([rest], len(rest)) if rest else ([], 0)
    last = "".join(open_line) + decoder.decode(b"", final=True)
    if last:
        yield last


async def sse_events(lines: AsyncIterable[str], max_chars: int = MAX_EVENT_CHARS) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) for each event in `lines`; the name is "message" when the server gave none.
    Raises EventTooLarge for an event whose data lines add up to more than `max_chars`."""
    event = ""
    data: list[str] = []
    size = 0
    async for line in lines:
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data, size = "", [], 0
        elif line.startswith(":"):  # a comment, e.g. a keep-alive
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                size += len(value) + 1
                if size > max_chars:
                    raise EventTooLarge(_too_long("an event", max_chars))
                data.append(value)
    if data:  # a last event without its blank line: still read, the reader decides if the reply is complete
        yield event or "message", "\n".join(data)


def _check(ended: list[str], rest: str, open_chars: int, max_chars: int) -> None:
    """Raise EventTooLarge when a line of a piece (`ended` lines, then `rest`), the first continuing the
    `open_chars` already kept, is longer than `max_chars`."""
    first = open_chars + len(ended[0] if ended else rest)
    if max(first, len(rest), *(len(line) for line in ended[1:])) > max_chars:
        raise EventTooLarge(_too_long("a line", max_chars))


def _too_long(what: str, max_chars: int) -> str:
    return f"{what} of the stream is longer than {max_chars // (1024 * 1024)} MB"
