"""The web fetcher: one public http(s) URL to readable text, through the guard at every hop.

Each hop is checked by `Guard` and sent to the address the guard checked: the request URL carries that
IP, the Host header and the TLS server name (SNI, also the name the certificate is verified against)
carry the host name. So nothing resolves the name again between check and connect. Redirects are
followed by hand (at most `MAX_REDIRECTS`), each one checked again. A plain-http URL whose host is a
name is tried over https first (on the default port) and falls back to http only when https cannot be
reached. The body is read up to `max_bytes`; the text returned is cut at `max_chars`. Pages are cached
for 15 minutes per URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from urllib.parse import urljoin

import httpx

from connectors.web.content import Readable, UnsupportedContent, readable
from connectors.web.guard import BlockedURL, Guard, Target, literal_address, parse_url

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
CACHE_TTL_S = 15 * 60
CACHE_ENTRIES = 64  # each holds at most max_chars of text
UPGRADE_CONNECT_S = 4.0  # how long an https attempt for an http:// URL may take to connect
USER_AGENT = "Anyy/0.1 (personal assistant)"
_REDIRECTS = {301, 302, 303, 307, 308}
_CHUNK = 64 * 1024
# What Accept-Encoding offers, with the zlib window bits that decode it (0: no decoding).
_ENCODINGS = {"identity": 0, "gzip": 31, "x-gzip": 31, "deflate": 15}


class FetchError(Exception):
    """A fetch that failed in a way the model can read: blocked, unreachable, HTTP error, bad type.

    `remote` is True when the message quotes or follows what a server sent (a content type, an encoding
    name, a URL a redirect chose, a PDF parser's complaint about the body): the caller must show such a
    message as outside content. A status's reason phrase is never quoted: the standard phrase is ours."""

    def __init__(self, message: str, *, remote: bool = False) -> None:
        super().__init__(message)
        self.remote = remote


@dataclass(frozen=True)
class Page:
    """A fetched page as text."""

    url: str  # as asked for
    final_url: str  # after the https upgrade and redirects
    status: int
    content_type: str
    kind: str  # "html", "text" or "pdf"
    title: str | None
    text: str
    bytes_read: int
    body_truncated: bool  # the body was longer than max_bytes
    chars_total: int  # length of the text before the max_chars cut

    @property
    def text_truncated(self) -> bool:
        return self.chars_total > len(self.text)


class WebFetcher:
    """Fetches model-supplied URLs through a `Guard`. One instance per process; `aclose()` at exit."""

    def __init__(self, guard: Guard, *, max_bytes: int = 5_000_000, max_chars: int = 100_000,
                 timeout_s: float = 20, verify: object = True) -> None:
        self.guard = guard
        self.max_bytes = max_bytes
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        # No keep-alive: connections are keyed by IP, and a connection opened (and TLS-verified) for one
        # host name must never carry a request for another name on the same address. No proxies from the
        # environment either: the guard's checked address is what gets connected to.
        self._verify = verify
        self._client: httpx.AsyncClient | None = None
        self._cache: OrderedDict[str, tuple[float, Page]] = OrderedDict()

    @property
    def _http(self) -> httpx.AsyncClient:
        """The HTTP client, made on the first fetch: its TLS context loads the CA bundle (tens of
        milliseconds), and the fetcher is built at every start-up."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), follow_redirects=False,
                                             trust_env=False, verify=self._verify,  # type: ignore[arg-type]
                                             limits=httpx.Limits(max_keepalive_connections=0),
                                             headers={"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"})
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def fetch(self, url: str, *, max_chars: int | None = None) -> Page:
        """The page at `url` as text (cached for 15 minutes). Raises FetchError with a readable reason."""
        limit = min(max_chars or self.max_chars, self.max_chars)
        cached = self._cache.get(url)
        if cached and time.monotonic() - cached[0] < CACHE_TTL_S:
            self._cache.move_to_end(url)
            return _cut(cached[1], limit)
        async with self._failing_as_fetch_error(url):
            page = await self._fetch(url)
        page = _cut(page, self.max_chars)  # what the cache holds stays bounded
        self._cache[url] = (time.monotonic(), page)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)
        log.info("web_fetch status=%s kind=%s bytes=%s redirected=%s", page.status, page.kind, page.bytes_read,
                 page.final_url != url)
        return _cut(page, limit)

    @contextlib.asynccontextmanager
    async def _failing_as_fetch_error(self, url: str) -> AsyncIterator[None]:
        """Bound the block by the fetch timeout and say each way it can fail as a FetchError about `url`."""
        try:
            async with asyncio.timeout(self.timeout_s):
                yield
        except TimeoutError:
            raise FetchError(f"{url}: no complete answer within {self.timeout_s:g} s") from None
        except BlockedURL as exc:
            raise FetchError(f"{url}: refused: {exc}") from None
        except _Redirected as exc:  # the refusal names a URL a server chose
            raise FetchError(f"{url}: refused after a redirect: {exc.__cause__}", remote=True) from None
        except httpx.HTTPError as exc:
            raise FetchError(f"{url}: {_network_reason(exc)}") from None
        except UnsupportedContent as exc:  # names the content type the server declared
            raise FetchError(f"{url}: {exc}", remote=True) from None

    async def _fetch(self, url: str) -> Page:
        upgrade = self._upgrade(url)
        if upgrade:
            try:
                return await self._follow(url, upgrade, connect_s=UPGRADE_CONNECT_S)
            except (httpx.ConnectError, httpx.ConnectTimeout):  # TLS failures are ConnectErrors too
                log.debug("web_fetch https_unavailable, falling back to http")
        return await self._follow(url, url)

    def _upgrade(self, url: str) -> str | None:
        """The https form of a plain-http URL on the default port whose host is a name, else None."""
        parts = parse_url(url)
        if parts.scheme != "http" or parts.port is not None or literal_address(parts.hostname or "") is not None:
            return None
        return parts._replace(scheme="https").geturl()

    async def fetch_bytes(self, url: str, *, max_bytes: int) -> tuple[bytes, str]:
        """The body at `url` (through the guard at every hop, no https upgrade, no cache) and its content
        type. FetchError when it is refused, fails, or is longer than `max_bytes`."""
        async with self._failing_as_fetch_error(url):
            _, response, body, complete = await self._get(url, None, max_bytes)
        if not complete:
            raise FetchError(f"{url}: longer than {max_bytes} bytes")
        return body, response.headers.get("content-type", "")

    async def _follow(self, asked: str, url: str, connect_s: float | None = None) -> Page:
        """Fetch `url` as text, following redirects; `connect_s` shortens the first connection's timeout
        (an https attempt that a firewall drops must leave time for the http fallback)."""
        target, response, body, complete = await self._get(url, connect_s, self.max_bytes)
        content_type = response.headers.get("content-type", "")
        text = await asyncio.to_thread(readable, content_type, body, url=target.url, complete=complete,
                                       max_bytes=self.max_bytes)
        return _page(asked, target, response.status_code, content_type, text, len(body), not complete)

    async def _get(self, url: str, connect_s: float | None,
                   max_bytes: int) -> tuple[Target, httpx.Response, bytes, bool]:
        """The final target, response, body (up to `max_bytes`) and whether it was complete, after
        following redirects, each hop checked by the guard."""
        first = url  # the URL we were asked for; later ones a server chose
        for hop in range(MAX_REDIRECTS + 1):
            try:
                target = await self.guard.check(url)
            except BlockedURL as exc:
                if hop == 0:
                    raise
                raise _Redirected() from exc
            response = await self._send(target, connect_s if hop == 0 else None)
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    url = urljoin(target.url, response.headers["location"])
                    continue
                if response.status_code >= 400:
                    # The server's reason phrase is its own words: the standard phrase of the code is ours.
                    code = response.status_code
                    shown = f"{first}: HTTP {code} {httpx.codes.get_reason_phrase(code)}".rstrip()
                    if hop:
                        raise FetchError(f"{shown} (at {target.url}, after {hop} redirect(s))", remote=True)
                    raise FetchError(shown)
                body, complete = await self._read(response, max_bytes)
            finally:
                await response.aclose()
            return target, response, body, complete
        raise FetchError(f"{first}: more than {MAX_REDIRECTS} redirects")

    async def _send(self, target: Target, connect_s: float | None) -> httpx.Response:
        ip = f"[{target.address}]" if ":" in target.address else target.address
        host_header = target.url.split("/", 3)[2]  # the host (and explicit port) as the URL has it
        request = self._http.build_request(
            "GET", f"{target.scheme}://{ip}:{target.port}{target.target}",
            headers={"Host": host_header, "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.8"},
            extensions={"sni_hostname": target.host},
            timeout=httpx.Timeout(self.timeout_s, connect=min(connect_s or self.timeout_s, self.timeout_s)))
        return await self._http.send(request, stream=True)

    async def _read(self, response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
        """The decoded body up to `max_bytes`, and whether it was complete.

        Decompression is done here with a bounded output, so a small compressed body cannot expand
        past the cap in memory (a "zip bomb")."""
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in _ENCODINGS:
            raise FetchError(f"the server sent an unsupported content encoding {encoding!r}", remote=True)
        inflate = zlib.decompressobj(_ENCODINGS[encoding]) if _ENCODINGS[encoding] else None
        chunks: list[bytes] = []
        size = 0
        async for raw in response.aiter_raw(_CHUNK):
            try:
                data = inflate.decompress(raw, max_bytes + 1 - size) if inflate else raw
            except zlib.error:
                raise FetchError("the server sent a corrupt compressed body") from None
            chunks.append(data)
            size += len(data)
            if size > max_bytes:
                return b"".join(chunks)[:max_bytes], False
        return b"".join(chunks), True


class _Redirected(Exception):
    """A redirect's target was refused by the guard (the BlockedURL is its cause)."""


def _page(asked: str, target: Target, status: int, content_type: str, text: Readable, size: int,
          truncated: bool) -> Page:
    return Page(url=asked, final_url=target.url, status=status, content_type=content_type, kind=text.kind,
                title=text.title, text=text.text, bytes_read=size, body_truncated=truncated,
                chars_total=len(text.text))


def _cut(page: Page, max_chars: int) -> Page:
    return page if len(page.text) <= max_chars else replace(page, text=page.text[:max_chars])


def _network_reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "the server did not answer in time"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect to the server"
    if isinstance(exc, httpx.TooManyRedirects):
        return "too many redirects"
    return f"the request failed ({type(exc).__name__})"
