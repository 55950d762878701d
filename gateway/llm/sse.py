"""Server-sent events, as both providers stream them: `event:` and `data:` lines, a blank line ends one
event. Only what the two wire formats use is read (no `id:`/`retry:` reconnection: a cut stream is a
failed attempt, never resumed)."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator

_LINE_END = re.compile(r"\r\n|\r|\n")


async def sse_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """The stream's lines, ended as the SSE format says: CRLF, LF or CR, and nothing else.

    Text's own line splitting (which httpx's `aiter_lines` uses) also breaks at U+2028, U+2029, U+0085
    and a few more, which a provider may send raw inside a JSON string: the data line would be cut in two.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ""
    async for chunk in chunks:
        buffer += decoder.decode(chunk)
        if "\r" in buffer:
            cut = len(buffer) - 1 if buffer.endswith("\r") else len(buffer)  # a CR may be half of a CRLF
            *lines, rest = _LINE_END.split(buffer[:cut])
            buffer = rest + buffer[cut:]
        else:  # both providers end lines with LF alone: a plain split is twice as fast
            *lines, buffer = buffer.split("\n")
        for line in lines:
            yield line
    *lines, rest = _LINE_END.split(buffer + decoder.decode(b"", final=True))
    for line in lines:
        yield line
    if rest:
        yield rest


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) for each event in `lines`; the name is "message" when the server gave none."""
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
        elif line.startswith(":"):  # a comment, e.g. a keep-alive
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if data:  # a last event without its blank line: still read, the reader decides if the reply is complete
        yield event or "message", "\n".join(data)
