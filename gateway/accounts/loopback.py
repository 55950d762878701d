"""Where an authorization code comes back to `anyy accounts add`: a one-shot listener on a loopback port,
raced against the owner pasting the address the browser ended on.

The redirect goes to `http://127.0.0.1:PORT/` (Google) or `http://localhost:PORT/` (Microsoft). When the
browser runs on this machine it reaches the listener; when it runs on another one (a headless server) it
shows a "can't connect" page whose address holds the code, and the owner pastes that address here.
Whichever comes first wins. Either way the answer must be the address of THIS sign-in: our host and port,
path `/`, and the `state` we sent. A pasted address that is not is refused with a message saying why, and
nothing of it is used. A request to the listener that is not is answered and ignored, the listener
waiting on: any local process, or any web page open in the owner's browser, can reach the port, and must
not be able to end the sign-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from gateway.accounts.grant import OAuthError

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

WAIT_S = 600.0  # how long a sign-in waits for the browser or a paste
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
DONE_PAGE = ("<!doctype html><title>Anyy</title><p>Signed in. You can close this tab and go back to the "
             "terminal.</p>")
REFUSED_PAGE = ("<!doctype html><title>Anyy</title><p>The sign-in was not allowed. The terminal says why.</p>")
IGNORED_PAGE = ("<!doctype html><title>Anyy</title><p>This address is not the answer to the sign-in waiting in "
                "the terminal, so it was ignored. Open the link the terminal printed.</p>")


class RedirectRefused(OAuthError):
    """The answer was not this sign-in's (another address, a missing or different `state`), or the
    provider said no (`error=...`). Its text says which, and never holds the code."""


def check_redirect(params: dict[str, str], state: str) -> str:
    """The authorization code from a redirect's query, after checking it belongs to this sign-in."""
    if "error" in params:
        detail = params.get("error_description", "").strip()
        said = f" ({detail})" if detail else ""
        raise RedirectRefused(f"the provider refused the sign-in: {params['error']}{said}")
    if params.get("state") != state:
        raise RedirectRefused("the address does not belong to this sign-in (its `state` differs); "
                              "start again with `anyy accounts add`")
    code = params.get("code", "")
    if not code:
        raise RedirectRefused("the address holds no authorization code")
    return code


def parse_pasted(text: str, redirect_uri: str) -> dict[str, str]:
    """The query of a pasted address, when it is this sign-in's redirect address (host, port, path)."""
    port = urlsplit(redirect_uri).port
    url = text.strip().strip("<>\"'")
    try:
        parts = urlsplit(url)
        pasted_port = parts.port
    except ValueError as exc:
        raise RedirectRefused(f"that is not an address ({exc})") from None
    if parts.scheme != "http" or parts.netloc.lower().rsplit(":", 1)[0] not in LOOPBACK_HOSTS:
        raise RedirectRefused(f"that is not the address this sign-in redirects to (it starts {redirect_uri}); "
                              "paste the whole address from the browser's address bar")
    if pasted_port != port:
        raise RedirectRefused(f"that address is for port {pasted_port}, this sign-in listens on {port}: "
                              "it comes from another sign-in; use the link printed above")
    if parts.path not in ("", "/"):
        raise RedirectRefused(f"that is not the address this sign-in redirects to (it starts {redirect_uri})")
    return dict(parse_qsl(parts.query, keep_blank_values=True))


def _answers(params: dict[str, str], state: str | None) -> bool:
    """Whether a request to the listener is the redirect of the sign-in waiting for `state`: its `state`
    (compared in constant time: it is what keeps others out) and a code or an error."""
    if state is None or not ("code" in params or "error" in params):
        return False
    return hmac.compare_digest(params.get("state", "").encode(), state.encode())


class Loopback:
    """A listener on 127.0.0.1 (and ::1 where it can, for `localhost`) on one free port, open until the
    first answer carrying the sign-in's `state`. Use it as an async context manager; `port` and
    `redirect_uri` are known once entered. `host` is the name the redirect address uses: Google documents
    127.0.0.1, Microsoft's registration takes `http://localhost` (any port)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._answer: asyncio.Future[dict[str, str]] | None = None
        self._state: str | None = None  # known once `wait` is called; until then every request is ignored
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Loopback:
        from aiohttp import web  # the dashboard's server: only a sign-in loads it here

        loop = asyncio.get_running_loop()
        self._answer = loop.create_future()
        app = web.Application()
        app.router.add_get("/", self._redirected)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runner = runner
        first = socket.socket(socket.AF_INET)
        first.bind(("127.0.0.1", 0))
        self.port = first.getsockname()[1]
        socks = [first]
        try:  # `localhost` may resolve to ::1 first; the same port there, where the host has IPv6
            second = socket.socket(socket.AF_INET6)
            second.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            second.bind(("::1", self.port))
            socks.append(second)
        except OSError:
            second.close()
        for sock in socks:
            await web.SockSite(runner, sock).start()
        return self

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _redirected(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        assert self._answer is not None
        params = dict(request.query)
        if not _answers(params, self._state):  # a probe, a stray visit, a forged or stale redirect
            log.info("loopback_request_ignored")
            return web.Response(status=400, text=IGNORED_PAGE, content_type="text/html")
        if not self._answer.done():
            self._answer.set_result(params)
        page = REFUSED_PAGE if "error" in params else DONE_PAGE
        return web.Response(text=page, content_type="text/html")

    async def wait(self, state: str, pasted: Callable[[], asyncio.Future[str]] | None = None,
                   timeout: float = WAIT_S) -> str:
        """The authorization code: from the browser's redirect to the listener or from a pasted address,
        whichever comes first. A request to the listener without this `state` is ignored; a wrong pasted
        address or the provider's refusal raises RedirectRefused, the timeout OAuthError."""
        assert self._answer is not None, "enter the Loopback first"
        self._state = state
        waiters: list[asyncio.Future[object]] = [self._answer]  # type: ignore[list-item]
        paste = pasted() if pasted is not None else None
        if paste is not None:
            waiters.append(paste)  # type: ignore[arg-type]
        try:
            async with asyncio.timeout(timeout):
                while True:
                    done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                    if self._answer in done:
                        return check_redirect(self._answer.result(), state)
                    assert paste is not None
                    text = paste.result()
                    if not text:  # stdin closed (nothing to paste from): wait for the browser alone
                        waiters.remove(paste)  # type: ignore[arg-type]
                        continue
                    return check_redirect(parse_pasted(text, self.redirect_uri), state)
        except TimeoutError:
            raise OAuthError(f"no answer from the browser within {timeout / 60:.0f} minutes; "
                             "start again with `anyy accounts add`") from None


def read_pasted_line() -> asyncio.Future[str]:
    """The first line typed or piped on stdin ("" at end of input).

    A daemon thread reads the file descriptor directly, not `sys.stdin`: when the browser wins, the
    process ends without waiting for a line that never comes (an executor thread would be joined at
    exit), and no buffered reader's lock is held at interpreter shutdown."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(text: str) -> None:
        if not future.done():
            future.set_result(text)

    def read() -> None:
        data = b""
        try:
            while b"\n" not in data:
                chunk = os.read(0, 4096)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            log.warning("paste_unreadable error=%s", exc)
            data = b""
        text = data.decode("utf-8", "replace").split("\n", 1)[0].strip()
        with contextlib.suppress(RuntimeError):  # the sign-in is over, its loop closed: nobody waits
            loop.call_soon_threadsafe(settle, text)

    threading.Thread(target=read, name="anyy-paste", daemon=True).start()
    return future
