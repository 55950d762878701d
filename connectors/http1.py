"""An HTTP/1.1 client transport for httpx on asyncio streams.

httpx's default transport (httpcore over anyio and h11) costs about half a millisecond of CPU per
request beyond the exchange itself, and ~45 ms of imports. `Http1Transport` does the same exchange
directly on asyncio streams behind httpx's public `AsyncBaseTransport`, so httpx stays the client API:
it builds the request, applies timeouts, decodes content, raises its own exceptions.

- A keep-alive pool per origin: a request takes the most recently idle connection; one the server has
  closed, or idle longer than `keepalive_expiry`, is dropped instead. At most `max_connections`
  requests per origin at once, a request beyond that waits (the pool timeout bounds the wait).
- Responses framed by Content-Length, chunked coding (extensions and trailers tolerated) or the end of
  the connection; 1xx skipped; no body for HEAD, 204, 304. `Connection: close` and HTTP/1.0 responses
  end the connection. The body's bytes are passed on raw: content decoding is httpx's.
- A reused connection that fails before any byte of the response (the server closed it while it sat
  idle) is retried once on a fresh one; a fresh connection's failure is final.
- A response closed or cancelled before its end closes its connection: nothing half-read goes back to
  the pool. Errors are httpx's exceptions with the OS error as `__cause__`.

Not supported: HTTP/2, proxies (httpx routes environment proxies only without `transport=`), `Expect:
100-continue`, streaming request bodies (a request body is read whole before it is sent).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator

import httpx

from connectors.http1_wire import (
    CHUNKED,
    UNTIL_CLOSE,
    body_length,
    chunk_size,
    chunked,
    keeps_alive,
    parse_head,
    request_head,
)

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # bytes of a response head, and of one chunk-size or trailer line
_PIECE = 64 * 1024  # at most this much of a body per read
_CUT = "the server closed the connection before the response was complete"
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # what httpx's clients default to


class _Connection:
    """One TCP (or TLS) connection, its bytes received and not yet parsed, and what the pool knows of it.

    The response is parsed from `buf`, filled a socket read at a time: a burst of small chunks (a
    streamed reply's events) costs one read, not three awaited reads per chunk."""

    __slots__ = ("buf", "idle_since", "reader", "responded", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.reused = False
        self.responded = False  # a byte of the current response has arrived
        self.idle_since = 0.0

    def alive(self) -> bool:
        """Not closed by the server, and no stray byte waiting (which no request asked for)."""
        return not (self.buf or self.reader.at_eof() or self.writer.is_closing() or self.reader.exception())

    async def fill(self, seconds: float | None, request: httpx.Request) -> bool:
        """Add what the socket has (waiting up to `seconds` for it) to `buf`; False at its end."""
        try:
            async with asyncio.timeout(seconds):
                data = await self.reader.read(_PIECE)
        except TimeoutError as exc:
            raise httpx.ReadTimeout("timed out waiting for the response", request=request) from exc
        except OSError as exc:
            raise httpx.ReadError(f"reading the response failed: {exc or type(exc).__name__}",
                                  request=request) from exc
        if not data:
            return False
        self.responded = True
        self.buf += data
        return True

    async def take_until(self, end: bytes, seconds: float | None, request: httpx.Request) -> bytes:
        """The bytes of `buf` through `end` (a line, a head), read as far as it takes."""
        start = 0
        while (at := self.buf.find(end, start)) < 0 and len(self.buf) <= MAX_HEAD:
            start = max(0, len(self.buf) - len(end) + 1)
            if not await self.fill(seconds, request):
                cut = self.responded or self.buf
                raise httpx.RemoteProtocolError(_CUT if cut else "the server closed the connection without a response",
                                                request=request) from EOFError()
        size = at + len(end) if at >= 0 else len(self.buf)
        if size > MAX_HEAD:
            error = ValueError(f"a response header section or line over {MAX_HEAD // 1024} KiB")
            raise httpx.RemoteProtocolError(str(error), request=request) from error
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data


class _Pool:
    """The connections to one origin, and the slots that cap its concurrent requests."""

    def __init__(self, limits: httpx.Limits) -> None:
        self.slots = asyncio.Semaphore(limits.max_connections or 2**31)
        self.idle: list[_Connection] = []
        self.open: set[_Connection] = set()
        self.max_idle = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else 2**31
        self.expiry = limits.keepalive_expiry
        self.closed = False

    async def acquire(self, seconds: float | None, request: httpx.Request) -> None:
        if not self.slots.locked():
            await self.slots.acquire()  # returns at once
            return
        try:
            async with asyncio.timeout(seconds):
                await self.slots.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout("timed out waiting for a free connection", request=request) from exc

    def take_idle(self) -> _Connection | None:
        """The most recently idle connection still usable; the stale ones are closed."""
        now = asyncio.get_running_loop().time()
        while self.idle:
            conn = self.idle.pop()
            if conn.alive() and (self.expiry is None or now - conn.idle_since < self.expiry):
                conn.reused = True
                return conn
            self.drop(conn, abort=False)
        return None

    def drop(self, conn: _Connection, *, abort: bool = True) -> None:
        """Close `conn`: abruptly when a response may be half-read, so no stale byte survives."""
        self.open.discard(conn)
        if abort:
            conn.writer.transport.abort()
        else:
            conn.writer.close()

    def release(self, conn: _Connection | None, reusable: bool) -> None:
        """The end of a request: its connection goes back to the idle list or is closed, its slot freed."""
        if conn is not None:
            if reusable and not self.closed and len(self.idle) < self.max_idle and conn.alive():
                conn.idle_since = asyncio.get_running_loop().time()
                self.idle.append(conn)
            else:
                self.drop(conn, abort=not reusable)
        self.slots.release()

    def close(self) -> None:
        self.closed = True
        for conn in list(self.open):
            self.drop(conn, abort=conn not in self.idle)
        self.idle.clear()


class Http1Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams, for `httpx.AsyncClient(transport=...)`.

    `ssl_context` verifies https servers; by default httpx's own (`httpx.create_ssl_context()`, its CA
    bundle), built at the first https connection. `limits` apply per origin.
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None,
                 limits: httpx.Limits = LIMITS) -> None:
        self._ssl_context = ssl_context
        self._limits = limits
        self._pools: dict[tuple[bytes, bytes, int], _Pool] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        read_s = timeouts.get("read")
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = _Pool(self._limits)
        await pool.acquire(timeouts.get("pool"), request)
        conn: _Connection | None = None
        try:
            message = await _request_bytes(request)
            conn = pool.take_idle()
            while True:
                if conn is None:
                    conn = await self._connect(origin, timeouts.get("connect"), request)
                    pool.open.add(conn)
                conn.responded = False
                try:
                    await _send(conn, message, timeouts.get("write"), request)
                    version, status, reason, headers = await _read_head(conn, read_s, request)
                    break
                except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
                    if not conn.reused or conn.responded:
                        raise
                    log.debug("http1_stale_connection host=%s error=%r", url.host, exc)
                    pool.drop(conn)
                    conn = None
            try:
                length = body_length(request.method.encode(), status, headers)
            except ValueError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except BaseException:
            pool.release(conn, reusable=False)
            raise
        reusable = keeps_alive(version, headers) and length != UNTIL_CLOSE and not _asks_close(request)
        stream: httpx.AsyncByteStream
        if length == 0:
            pool.release(conn, reusable)
            stream = httpx.ByteStream(b"")
        else:
            stream = _Body(pool, conn, length, reusable, read_s, request)
        return httpx.Response(status, headers=headers, stream=stream,
                              extensions={"http_version": version, "reason_phrase": reason})

    async def aclose(self) -> None:
        """Close every connection, idle or in use."""
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    async def _connect(self, origin: tuple[bytes, bytes, int], seconds: float | None,
                       request: httpx.Request) -> _Connection:
        scheme, raw_host, port = origin
        host = raw_host.decode("ascii")
        tls: ssl.SSLContext | None = None
        if scheme == b"https":
            if self._ssl_context is None:
                self._ssl_context = httpx.create_ssl_context()
            tls = self._ssl_context
        elif scheme != b"http":
            raise httpx.UnsupportedProtocol(f"no transport for a {scheme.decode()!r} URL", request=request)
        try:
            async with asyncio.timeout(seconds):
                reader, writer = await asyncio.open_connection(host, port, ssl=tls,
                                                               server_hostname=host if tls else None)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
        return _Connection(reader, writer)


class _Body(httpx.AsyncByteStream):
    """A response body read from its connection as it arrives; the connection goes back to the pool
    after the last byte, and is closed if the body is left (closed, cancelled, failed) before it."""

    def __init__(self, pool: _Pool, conn: _Connection, length: int, reusable: bool, read_s: float | None,
                 request: httpx.Request) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._length = length
        self._reusable = reusable
        self._read_s = read_s
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            raise httpx.StreamClosed()
        try:
            if self._length == CHUNKED:
                async for piece in self._chunks(conn):
                    yield piece
            else:
                async for piece in self._pieces(conn, self._length):
                    yield piece
        except BaseException:
            self._finish(reusable=False)
            raise
        self._finish(self._reusable)

    async def aclose(self) -> None:
        self._finish(reusable=False)

    def _finish(self, reusable: bool) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            self._pool.release(conn, reusable)

    async def _pieces(self, conn: _Connection, length: int) -> AsyncIterator[bytes]:
        """`length` bytes (UNTIL_CLOSE: all until the end of the connection), as they arrive."""
        buf, left = conn.buf, length
        while left:
            if not buf and not await conn.fill(self._read_s, self._request):
                if left < 0:
                    return
                raise httpx.RemoteProtocolError(f"{_CUT} ({left} bytes of the body missing)",
                                                request=self._request) from EOFError()
            piece = bytes(buf) if left < 0 or left >= len(buf) else bytes(buf[:left])
            del buf[:len(piece)]
            left -= len(piece) if left > 0 else 0
            yield piece

    async def _chunks(self, conn: _Connection) -> AsyncIterator[bytes]:
        """The data of a chunked body: every chunk complete in the buffer at once, as one piece. The
        trailer fields after the last chunk are read and ignored."""
        buf, request = conn.buf, self._request
        pieces: list[bytes] = []
        left = 0  # bytes of the current chunk's data not yet taken
        crlf = False  # the current chunk's data is taken, the CRLF after it is not
        while True:
            if left and buf:
                piece = bytes(buf[:left])
                del buf[:left]
                pieces.append(piece)
                left -= len(piece)
                crlf = not left
            elif crlf and len(buf) >= 2:
                if buf[:2] != b"\r\n":
                    raise httpx.RemoteProtocolError("a chunk longer than its size line says", request=request)
                del buf[:2]
                crlf = False
            elif not left and not crlf and (end := buf.find(b"\r\n")) >= 0:
                try:
                    size = chunk_size(bytes(buf[:end + 2]))
                except ValueError as exc:
                    raise httpx.RemoteProtocolError(str(exc), request=request) from exc
                del buf[:end + 2]
                if size == 0:
                    break
                left = size
            else:
                if pieces:
                    yield b"".join(pieces)
                    pieces.clear()
                if not left and not crlf and len(buf) > MAX_HEAD:
                    raise httpx.RemoteProtocolError(f"a chunk size line over {MAX_HEAD // 1024} KiB", request=request)
                if not await conn.fill(self._read_s, request):
                    raise httpx.RemoteProtocolError(f"{_CUT} (in a chunked body)", request=request) from EOFError()
        if pieces:
            yield b"".join(pieces)
        while await conn.take_until(b"\r\n", self._read_s, request) != b"\r\n":
            pass


async def _request_bytes(request: httpx.Request) -> bytes:
    """The whole request as sent: head and body."""
    stream = request.stream
    if not isinstance(stream, httpx.AsyncByteStream):  # a body given as a plain (sync) iterator
        raise TypeError("an async transport cannot send a request body that is only a sync stream")
    body = b"".join([part async for part in stream])
    if any(n.lower() == b"transfer-encoding" for n, _ in request.headers.raw):
        body = chunked(body)
    try:
        head = request_head(request.method.encode(), request.url.raw_path, request.headers.raw)
    except ValueError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc
    return head + body


def _asks_close(request: httpx.Request) -> bool:
    return "close" in request.headers.get("connection", "").lower()


async def _send(conn: _Connection, message: bytes, seconds: float | None, request: httpx.Request) -> None:
    try:
        conn.writer.write(message)
        async with asyncio.timeout(seconds):
            await conn.writer.drain()
    except TimeoutError as exc:
        raise httpx.WriteTimeout("timed out sending the request", request=request) from exc
    except OSError as exc:
        raise httpx.WriteError(f"sending the request failed: {exc or type(exc).__name__}", request=request) from exc


async def _read_head(conn: _Connection, seconds: float | None,
                     request: httpx.Request) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """The response's head, the interim (1xx) ones skipped."""
    while True:
        data = await conn.take_until(b"\r\n\r\n", seconds, request)
        try:
            version, status, reason, headers = parse_head(data)
        except ValueError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        if status >= 200:
            return version, status, reason, headers
