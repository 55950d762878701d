"""Server-sent events, as both providers stream them: `event:` and `data:` lines, a blank line ends one
event. Only what the two wire formats use is read (no `id:`/`retry:` reconnection: a cut stream is a
failed attempt, never resumed)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) for each event in `lines`; the name is "message" when the server gave none."""
    event, data = "", []
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
