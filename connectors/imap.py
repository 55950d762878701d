"""One IMAP login kept open: connect (TLS, STARTTLS or plain), log in, reconnect after a drop.

aioimaplib speaks the protocol; this module adds what a resident process needs around it: a lock (one
connection has one selected folder at a time), a watch on the connection so a drop is noticed instead of
waited out, a single retry for operations that are safe to repeat, STARTTLS (which aioimaplib lacks), a
SASL XOAUTH2 login that answers a refusal's challenge (see `_XOAuth2`), and the few wire formats we send
(quoted strings, modified UTF-7 folder names, dates) or read (FETCH).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import date
from typing import Any, Literal, TypeVar

import aioimaplib
from pydantic import SecretStr

from connectors.mailerrors import EmailError, network_error, scrubbed
from connectors.oauth_token import TokenProvider

log = logging.getLogger(__name__)

T = TypeVar("T")
Security = Literal["ssl", "starttls", "none"]

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_FETCH_START = re.compile(rb"^\d+ FETCH \(")


def quote(value: str) -> str:
    """An IMAP quoted string; line breaks are folded to spaces (they would end the command)."""
    value = " ".join(value.split())
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mailbox(name: str) -> str:
    """A folder name as IMAP wants it: modified UTF-7 (RFC 3501 5.1.3), quoted."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            raw = base64.b64encode("".join(pending).encode("utf-16-be")).decode("ascii")
            out.append("&" + raw.rstrip("=").replace("/", ",") + "-")
            pending.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            pending.append(ch)
    flush()
    return quote("".join(out))


def imap_date(d: date) -> str:
    """RFC 3501 date (`7-Mar-2024`), English month names whatever the locale."""
    return f"{d.day}-{_MONTHS[d.month - 1]}-{d.year}"


def server_text(response: aioimaplib.Response) -> str:
    """The human part of a server response, on one line."""
    lines = [bytes(x).decode("utf-8", "replace") for x in response.lines if isinstance(x, (bytes, bytearray))]
    return " ".join(" ".join(lines).split()) or response.result


def searched(lines: list[bytes | bytearray]) -> list[int]:
    """The UIDs of a SEARCH response (aioimaplib has already cut the `SEARCH` keyword off its lines)."""
    return [int(n) for line in lines[:-1] for n in bytes(line).split() if n.isdigit()]


def fetched(lines: list[bytes | bytearray]) -> dict[int, tuple[bytes, bool]]:
    """UID -> (message bytes, unseen) from a FETCH response. aioimaplib hands literals over as bytearray
    and the surrounding response text (UID, FLAGS, in any order the server likes) as bytes."""
    out: dict[int, tuple[bytes, bool]] = {}
    meta, body = b"", b""

    def flush() -> None:
        uid = re.search(rb"UID (\d+)", meta)
        flags = re.search(rb"FLAGS \(([^)]*)\)", meta)
        if uid:
            out[int(uid.group(1))] = (body, not (flags and b"\\Seen" in flags.group(1)))

    for line in lines:
        if isinstance(line, bytearray):
            body = bytes(line)
        elif _FETCH_START.match(line):
            flush()
            meta, body = line, b""
        else:
            meta += b" " + line
    flush()
    return out


class _ConnectionDropped(Exception):
    pass


class _XOAuth2(aioimaplib.Command):
    """AUTHENTICATE XOAUTH2 with its initial response (RFC 4959 SASL-IR), as aioimaplib's own `xoauth2`
    sends it, plus the one step that method lacks: a server refusing the token sends its reason as a
    challenge (`+ <base64 JSON>`) and waits for an empty reply before its tagged NO (Google's and
    Microsoft's XOAUTH2 documentation). aioimaplib hands that line to the pending command, so the command
    answers it here; without the answer the login would hang until the timeout."""

    def __init__(self, protocol: aioimaplib.IMAP4ClientProtocol, user: str, token: str, timeout: float) -> None:
        sasl = base64.b64encode(f"user={user}\1auth=Bearer {token}\1\1".encode()).decode("ascii")
        super().__init__("AUTHENTICATE", protocol.new_tag(), "XOAUTH2", sasl, loop=protocol.loop, timeout=timeout)
        self._protocol = protocol

    def append_to_resp(self, line: bytes, result: str = "Pending") -> None:
        if line.startswith(b"+"):
            self._protocol.send("")  # take the refusal; the reason is the tagged NO that follows
            return
        super().append_to_resp(line, result)


class ImapConnection:
    """A logged-in IMAP connection, opened on first use and reopened when the server dropped it.

    It logs in with `password`, or, for an OAuth account, with SASL XOAUTH2 and an access token from
    `token` (then `password` is unused)."""

    def __init__(self, *, host: str, port: int, security: Security, username: str, password: SecretStr,
                 timeout: float, tls: ssl.SSLContext, token: TokenProvider | None = None) -> None:
        self.host, self.port, self.security = host, port, security
        self.username, self._password, self.timeout, self._tls = username, password, timeout, tls
        self._token = token
        self._secrets = [password.get_secret_value()]  # what an error text must never echo: the password
        # and the tokens of the latest login
        self.where = f"IMAP server {host}:{port}"
        self._imap: aioimaplib.IMAP4 | None = None
        self._lost: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()

    def _error(self, text: str, *, remote: bool = False) -> EmailError:
        return EmailError(scrubbed(text, *self._secrets), remote=remote)

    async def _open(self) -> tuple[aioimaplib.IMAP4, asyncio.Future[None]]:
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_lost(_exc: Exception | None) -> None:
            if not lost.done():
                lost.set_result(None)

        imap = aioimaplib.IMAP4(host=self.host, port=self.port, timeout=self.timeout, conn_lost_cb=on_lost,
                                ssl_context=self._tls if self.security == "ssl" else None)
        try:
            await imap.wait_hello_from_server()
            if self.security == "starttls":
                await self._starttls(imap)
            response = await self._login(imap)
        except EmailError:
            _close(imap)
            raise
        except BaseException as exc:
            _close(imap)
            if not isinstance(exc, (OSError, TimeoutError, aioimaplib.AioImapException)):
                raise  # SignInNeeded from the token provider passes through as the one line it is
            raise self._error(network_error(exc, self.where, self.timeout) or f"{self.where} failed: {exc}") from None
        if response.result != "OK":
            _close(imap)
            what = "refused the access token" if self._token else "failed"
            raise self._error(f"IMAP login to {self.host}:{self.port} as {self.username} {what}: "
                              f"{server_text(response)}", remote=True)
        log.info("imap connected host=%s port=%s security=%s auth=%s", self.host, self.port, self.security,
                 "xoauth2" if self._token else "login")
        return imap, lost

    async def _login(self, imap: aioimaplib.IMAP4) -> aioimaplib.Response:
        """LOGIN with the password, or AUTHENTICATE XOAUTH2. A refused token is reported to the provider,
        which refreshes it (or hands over the one another resident refreshed); tried again only if it
        changed."""
        if self._token is None:
            return await imap.login(self.username, self._password.get_secret_value())
        token = await self._token()
        self._secrets = [token]
        response = await self._xoauth2(imap, token)
        if response.result != "OK" and (fresh := await self._token(refused=token)) != token:
            self._secrets.append(fresh)
            log.info("imap xoauth2 refused; retrying with a newer token host=%s", self.host)
            response = await self._xoauth2(imap, fresh)
        return response

    async def _xoauth2(self, imap: aioimaplib.IMAP4, token: str) -> aioimaplib.Response:
        proto = imap.protocol
        command = _XOAuth2(proto, self.username, token, self.timeout)
        response = await asyncio.wait_for(proto.execute(command, scrub=token), self.timeout)
        if response.result == "OK":
            proto.state = aioimaplib.AUTH
        return response

    async def _starttls(self, imap: aioimaplib.IMAP4) -> None:
        if not imap.has_capability("STARTTLS"):
            raise EmailError(f"{self.where} does not offer STARTTLS; set imap_security to 'ssl' or 'none'")
        proto = imap.protocol
        command = aioimaplib.Command("STARTTLS", proto.new_tag(), loop=proto.loop)
        response = await asyncio.wait_for(proto.execute(command), self.timeout)
        if response.result != "OK":
            raise EmailError(f"{self.where} refused STARTTLS: {server_text(response)}", remote=True)
        proto.transport = await asyncio.wait_for(asyncio.get_running_loop().start_tls(
            proto.transport, proto, self._tls, server_hostname=self.host), self.timeout)
        await asyncio.wait_for(proto.capability(), self.timeout)  # capabilities must be asked again after TLS

    async def _drop(self, *, logout: bool = False) -> None:
        imap, lost = self._imap, self._lost
        self._imap = self._lost = None
        if imap is None:
            return
        if logout and lost is not None and not lost.done():
            with suppress(Exception):  # a polite goodbye; the transport is closed either way
                await asyncio.wait_for(imap.logout(), self.timeout)
        _close(imap)

    async def run(self, op: Callable[[aioimaplib.IMAP4], Awaitable[T]], *, retry: bool = True) -> T:
        """Run `op` on the connection, (re)opening it first if needed. If the server drops the connection
        during `op`, it is reopened and `op` run once more, unless `retry` is False (not safe to repeat)."""
        async with self._lock:
            retried = False
            while True:
                if self._imap is None or self._lost is None or self._lost.done():
                    await self._drop()
                    self._imap, self._lost = await self._open()
                task = asyncio.ensure_future(op(self._imap))
                waiting: set[asyncio.Future[Any]] = {task, self._lost}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                try:
                    if not task.done():  # the connection went away under the command
                        task.cancel()
                        raise _ConnectionDropped()
                    return task.result()
                except _ConnectionDropped:
                    await self._drop()
                    if retried or not retry:
                        raise EmailError(f"{self.where} closed the connection") from None
                    retried = True
                    log.info("imap reconnect host=%s reason=connection-dropped", self.host)
                except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
                    await self._drop()  # the connection's state is unknown now; start fresh next time
                    raise self._error(network_error(exc, self.where, self.timeout)
                                      or f"{self.where} failed: {exc}") from None

    async def select(self, imap: aioimaplib.IMAP4, folder: str) -> None:
        """Select `folder` (inside `run`)."""
        response = await imap.select(mailbox(folder))
        if response.result != "OK":
            raise EmailError(f"cannot open folder {folder!r} on {self.where}: {server_text(response)}",
                             remote=True)

    async def fetch(self, imap: aioimaplib.IMAP4, uids: list[int], item: str) -> dict[int, tuple[bytes, bool]]:
        """UID FETCH `item` (plus UID and FLAGS) of the selected folder (inside `run`)."""
        response = await imap.uid("fetch", ",".join(map(str, uids)), f"(UID FLAGS {item})")
        if response.result != "OK":
            raise EmailError(f"{self.where} refused to fetch: {server_text(response)}", remote=True)
        return fetched(response.lines)

    async def close(self) -> None:
        """Log out and close; a later `run` reconnects."""
        async with self._lock:
            await self._drop(logout=True)


def _close(imap: aioimaplib.IMAP4) -> None:
    if imap.protocol.transport is not None:
        imap.protocol.transport.close()
