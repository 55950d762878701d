"""PTB's networking backend on aiohttp: how the Telegram surface's Bot API requests reach Telegram.

python-telegram-bot sends every request through a `telegram.request.BaseRequest`; its own `HTTPXRequest`
costs about 1.9 ms of CPU per sendMessage on httpx/httpcore (request building, the pool's per-connection
checks, h11, anyio), against about 0.4 ms here on aiohttp, whose HTTP parser is compiled (measured in
issue 25: `git show c172a5c:docs/benchmarks.md`, "Telegram load, second pass"). PTB keeps everything
else: building the parameters, reading Telegram's answer, its errors; this class only moves bytes, and
maps failures to PTB's `TimedOut` and `NetworkError` as `HTTPXRequest` does. Parameters go as a JSON
body, which Telegram accepts for every method but file uploads (those go as a multipart form, as PTB's
own do).

Timeouts follow `HTTPXRequest`'s defaults and meaning (seconds; a request may pass its own): `connect`
to open a connection, `read` for each read of the answer (a long poll passes its poll time on top),
`pool` to wait for a free connection. aiohttp has no write timeout; a stalled upload is ended by the
read timeout, which starts once the request is written.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

_DEFAULTS = {"connect": 5.0, "read": 5.0, "pool": 1.0}  # HTTPXRequest's


class AiohttpRequest(BaseRequest):
    """A `BaseRequest` over one aiohttp session with at most `connections` connections open."""

    def __init__(self, connections: int) -> None:
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        """The read timeout a request gets unless it passes its own (PTB adds a long poll's time to it)."""
        return _DEFAULTS["read"]

    async def initialize(self) -> None:
        """Open the session (PTB calls this from `Bot.initialize`, inside the running loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections)
            self._session = aiohttp.ClientSession(connector=connector, headers={"User-Agent": self.USER_AGENT})

    async def shutdown(self) -> None:
        """Close the session and its connections."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                         read_timeout: Any = BaseRequest.DEFAULT_NONE, write_timeout: Any = BaseRequest.DEFAULT_NONE,
                         connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                         pool_timeout: Any = BaseRequest.DEFAULT_NONE) -> tuple[int, bytes]:
        """Send one request; returns Telegram's status code and body (PTB reads them)."""
        session = self._session
        if session is None:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        connect = _seconds(connect_timeout, "connect")
        pool = _seconds(pool_timeout, "pool")
        # aiohttp's `connect` covers the wait for a free connection and the connecting itself.
        timeout = aiohttp.ClientTimeout(connect=None if connect is None or pool is None else connect + pool,
                                        sock_connect=connect, sock_read=_seconds(read_timeout, "read"))
        try:
            data, content_type = _body(request_data)
            headers = {"Content-Type": content_type} if content_type else None
            async with session.request(method, url, data=data, headers=headers, timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp's timeouts are asyncio.TimeoutError subclasses
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc


def _seconds(value: Any, name: str) -> float | None:
    """A timeout as passed (None: wait as long as it takes), or the default when none was passed."""
    return _DEFAULTS[name] if value is BaseRequest.DEFAULT_NONE else value


def _body(request_data: RequestData | None) -> tuple[bytes | aiohttp.FormData | None, str | None]:
    """The parameters as JSON (nested objects as objects, which the Bot API takes: one encoding, where a
    form would encode each of them on its own first), or, with files, as a multipart form."""
    if request_data is None:
        return None, None
    files = request_data.multipart_data
    if not files:
        return json.dumps(request_data.parameters).encode(), "application/json"
    form = aiohttp.FormData(request_data.json_parameters)
    for name, (filename, content, mime_type) in files.items():
        form.add_field(name, content, filename=filename, content_type=mime_type)
    return form, None
