"""Reading a response body under a bound: what a server sends is read as it arrives and no further than
the caller needs, so a body of any size costs at most its bound in memory."""

from __future__ import annotations

import httpx


async def read_at_most(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body of a streamed `response`, stopping past `limit` bytes (decoded, as httpx hands them):
    (what was read, at most `limit` bytes; whether that is the whole body). The caller closes the response,
    which ends a connection left half-read."""
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            return bytes(buf[:limit]), False
    return bytes(buf), True
