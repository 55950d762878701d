"""The guard proxy: a forward HTTP proxy on 127.0.0.1 through which the browser makes every request.

Chromium is started with this proxy for its context (and Playwright removes Chromium's implicit
loopback bypass), so every connection a page opens — the page itself, each redirect hop, subresources,
fetch/XHR, form posts, WebSockets — arrives here first as `CONNECT host:port` (https, wss) or as a
request with an absolute URL (http, ws). Each is checked by the web toolset's `Guard` (host rules, then
the private-network rule) and connected to the address the guard checked, so nothing resolves the name
a second time (no DNS rebinding between check and connect). A refused connection gets a 403 naming the
reason, and the refusal is recorded for the tool to report. A plain-http request the browser's own gate
did not see (`reads.SendGate`: a read sends only GET and HEAD, no WebSocket) is checked against it here.

A connection's bytes only ever go to the address checked for its first request: a plain-http request
is forwarded with `Connection: close`, and the client connection ends when the server's does. No proxy
credentials: the proxy reaches nothing the guard would not let this machine's processes reach directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from connectors.web.guard import BlockedURL, Guard

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
_CHUNK = 64 * 1024
_HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade"}
# What a page tried to do with what it was refused (else it tried to "send ... to" a URL).
_VERBS = {"a WebSocket": "open {} to", "a WebTransport session": "open {} to", "a peer connection": "open {} on",
          "a worker": "start {} from", "a service worker": "register {} from"}


@dataclass(frozen=True)
class Refusal:
    """A request refused: its URL (or `host:port` for a tunnel) and why. `sent` names what a page tried to
    send while it was only read ("a form", "a beacon", ...); empty for a refusal of the guard."""

    url: str
    reason: str
    at: float  # time.monotonic()
    sent: str = ""

    def describe(self) -> str:
        if self.sent:
            tried = _VERBS.get(self.sent, "send {} to").format(self.sent)
            return f"this page tried to {tried} {self.url}: blocked"
        return f"{self.url}: {self.reason}"


class GuardProxy:
    """One proxy server; `url` after `start()`. Keeps the last refusals (`refusals_since`)."""

    def __init__(self, guard: Guard, refuses_send: Callable[[str, bool], bool], *,
                 connect_timeout_s: float = 20.0) -> None:
        self.guard = guard
        self.refuses_send = refuses_send  # (method, is a WebSocket upgrade) -> refused now
        self.connect_timeout_s = connect_timeout_s
        self._refusals: deque[Refusal] = deque(maxlen=200)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    def record(self, refusal: Refusal) -> None:
        self._refusals.append(refusal)

    def refusals_since(self, since: float) -> list[Refusal]:
        """The refusals recorded at or after `since` (a `time.monotonic()` value)."""
        return [r for r in self._refusals if r.at >= since]

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                async with asyncio.timeout(HEAD_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                await _answer(writer, 400, "malformed request line")
                return
            method, target, version = parts
            if method == "CONNECT":
                shown, url = target, f"https://{target}/"
            else:
                shown = url = target
                if self._refused_send(method, target, lines[1:]):
                    await _answer(writer, 403, "refused by Anyy: reading a page sends nothing")
                    return
            try:
                checked = await self.guard.check(url)
            except BlockedURL as exc:
                self.record(Refusal(shown, str(exc), time.monotonic()))
                log.info("browser_request_refused method=%s reason=%s", method, str(exc)[:200])
                await _answer(writer, 403, f"refused by Anyy: {exc}")
                return
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    up_reader, upstream = await asyncio.open_connection(checked.address, checked.port)
            except (OSError, TimeoutError) as exc:
                await _answer(writer, 502, f"cannot connect to {checked.host}:{checked.port} ({exc})")
                return
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                first = await self._tunnel_start(reader, target)
                if first is None:
                    return
                upstream.write(first)
            else:
                upstream.write(_origin_form(method, checked.target, version, lines[1:]))
            await _pipe(reader, writer, up_reader, upstream)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # either side went away: nothing to report
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()

    def _refused_send(self, method: str, url: str, header_lines: list[str]) -> bool:
        """Whether the request is one a read may not send (then it is recorded as refused)."""
        upgrade = any(h.lower().startswith("upgrade:") for h in header_lines)
        if not self.refuses_send(method, upgrade):
            return False
        sent = "a WebSocket" if upgrade else f"a {method} request"
        self.record(Refusal(url, "reading a page sends nothing", time.monotonic(), sent))
        log.info("browser_send_refused method=%s upgrade=%s", method, upgrade)
        return True

    async def _tunnel_start(self, reader: asyncio.StreamReader, target: str) -> bytes | None:
        """A tunnel's first bytes, or None when they are a request a read may not send. Chromium tunnels
        ws:// through CONNECT too, so its handshake arrives here in plain text (TLS starts with a
        handshake record, 0x16, and stays opaque: its requests are the browser's own gate's to check)."""
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                first = await reader.read(_CHUNK)
                if not first or first[0] == 0x16:
                    return first
                while b"\r\n\r\n" not in first and len(first) < MAX_HEAD and (more := await reader.read(_CHUNK)):
                    first += more
        except TimeoutError:
            return None
        lines = first.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.partition(" ")[0]
        upgrade = any(h.lower().startswith("upgrade:") for h in lines[1:])
        url = f"{'ws' if upgrade else 'http'}://{target}{path if path.startswith('/') else '/'}"
        return None if self._refused_send(method, url, lines[1:]) else first


def _origin_form(method: str, target: str, version: str, header_lines: list[str]) -> bytes:
    """The request as sent to the server: origin-form target, hop-by-hop headers dropped (an upgrade
    request keeps its Upgrade and Connection headers: that is how a WebSocket starts), one request."""
    headers = [h for h in header_lines if h]
    upgrade = any(h.lower().startswith("upgrade:") for h in headers)
    kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
    if upgrade:
        kept += [h for h in headers if h.split(":", 1)[0].strip().lower() == "upgrade"]
        kept.append("Connection: Upgrade")
    else:
        kept.append("Connection: close")
    return (f"{method} {target} {version}\r\n" + "".join(f"{h}\r\n" for h in kept) + "\r\n").encode("latin-1")


async def _pipe(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, up_r: asyncio.StreamReader,
                up_w: asyncio.StreamWriter) -> None:
    """Copy both ways until either side closes."""
    tasks = [asyncio.create_task(_copy(client_r, up_w)), asyncio.create_task(_copy(up_r, client_w))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = text.encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
