"""The model client's HTTP/1.1 transport (connectors/http1.py) against real servers on 127.0.0.1: raw
asyncio servers that write exactly the bytes a test gives them, a TLS one with a trustme CA, a small
forward proxy, and the model client on top for the messages a person reads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import trustme

from connectors.http1 import Http1Transport
from gateway.llm import ModelUnavailable, OpenAIClient
from tests.support.ports import port_of, refusing_socket
from tests.test_llm import user

WAIT_S = 5


@dataclass
class Request:
    head: bytes
    body: bytes
    connection: int  # the server's count of the connection it came on, from 1

    @property
    def line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]


# Answers one request on its connection's writer; returns whether the connection stays open, or None to
# answer nothing more and wait for the client to close it.
Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[bool | None]]


async def settle() -> None:
    """Let the loop pass bytes just written on loopback to the client's reader before the next ones."""
    for _ in range(5):
        await asyncio.sleep(0)


def answer(*pieces: bytes, keep: bool | None = True) -> Handler:
    """A handler writing `pieces` one at a time, each reaching the client before the next."""
    async def handle(_: Request, writer: asyncio.StreamWriter) -> bool | None:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await settle()
        return keep
    return handle


@dataclass
class Server:
    """An HTTP/1.1 server that reads each request (head and Content-Length body) and lets `handler`
    answer it. `close_idle_after` requests on a connection, it closes that connection as the next
    request starts to arrive, unread: a server closing an idle keep-alive connection at that moment."""

    handler: Handler
    tls: ssl.SSLContext | None = None
    close_idle_after: int | None = None
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    gone: dict[int, asyncio.Event] = field(default_factory=dict)  # set when the client closed connection n
    ended: dict[int, asyncio.Event] = field(default_factory=dict)  # set when connection n is closed either way
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # set at each request
    url: str = ""

    async def __aenter__(self) -> Server:
        self._tasks: set[asyncio.Task[None]] = set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._converse(reader, writer)
        except asyncio.CancelledError:
            pass  # the test is over; ending quietly spares asyncio's "unhandled exception" report

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.gone[number] = gone = asyncio.Event()
        self.ended[number] = ended = asyncio.Event()
        served = 0
        try:
            while True:
                if served == self.close_idle_after:
                    await reader.read(1)
                    break
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    gone.set()
                    break
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = Request(head, await reader.readexactly(length), number)
                self.requests.append(request)
                self.arrived.set()
                served += 1
                keep = await self.handler(request, writer)
                if keep is None:
                    if not await reader.read():
                        gone.set()
                    break
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            gone.set()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
            ended.set()


def client(url: str, *, timeout: float = WAIT_S, **kw: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, transport=Http1Transport(**kw), timeout=timeout)


JSON_BODY = json.dumps({"hello": "world", "n": list(range(20))}).encode()
PLAIN = b"HTTP/1.1 200 Fine Thanks\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Y:  z \r\n\r\n%b" % (
    len(JSON_BODY), JSON_BODY)
CHUNKS = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"5;name=value\r\nhello\r\n1\r\n \r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: yes\r\n\r\n")


@pytest.mark.parametrize(("response", "body"), [(PLAIN, JSON_BODY), (CHUNKS, b"hello 0123456789abcdef")],
                         ids=["content-length", "chunked"])
async def test_a_response_split_at_every_byte_reads_whole_on_one_connection(response: bytes, body: bytes) -> None:
    splits = range(1, len(response))
    handlers = iter([answer(response[:k], response[k:]) for k in splits])
    async with Server(lambda request, writer: next(handlers)(request, writer)) as server:
        async with client(server.url) as http:
            for k in splits:
                pieces: list[bytes] = []
                async with http.stream("GET", "/x") as r:
                    async for piece in r.aiter_raw():
                        pieces.append(piece)
                assert (r.status_code, b"".join(pieces)) == (200, body), k
                if k > len(response) - len(body) and body is JSON_BODY:
                    assert len(pieces) == 2, k  # the body is passed on as it arrives
        assert server.connections == 1
    assert r.reason_phrase == ("Fine Thanks" if body is JSON_BODY else "OK")
    if body is JSON_BODY:
        assert r.headers["x-y"] == "z" and json.loads(b"".join(pieces))["hello"] == "world"


async def test_keep_alive_carries_every_request_on_one_connection() -> None:
    async with Server(answer(PLAIN)) as server, client(server.url) as http:
        for i in range(20):
            r = await http.post("/v1/chat", content=b"x" * i, headers={"Authorization": "Bearer k"})
            assert r.content == JSON_BODY
        assert server.connections == 1
        assert [r.body for r in server.requests] == [b"x" * i for i in range(20)]
        first = server.requests[0].head.lower()
        assert server.requests[0].line == b"POST /v1/chat HTTP/1.1"
        assert b"\r\nhost: 127.0.0.1:" in first and b"\r\nauthorization: bearer k\r\n" in first




async def test_an_idle_connection_the_server_closed_is_replaced_before_use(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "connectors.http1")
    async with Server(answer(PLAIN, keep=False)) as server, client(server.url) as http:
        await http.get("/one")
        await asyncio.wait_for(server.ended[1].wait(), WAIT_S)
        await settle()  # the client's reader sees the server's FIN
        assert (await http.get("/two")).content == JSON_BODY
        assert server.connections == 2
        assert [(r.line, r.connection) for r in server.requests] == [(b"GET /one HTTP/1.1", 1),
                                                                     (b"GET /two HTTP/1.1", 2)]
    assert "http1_stale_connection" not in caplog.text  # found closed before use, not by a failed try


async def test_a_reused_connection_dropped_as_the_request_arrives_is_retried_once_on_a_new_one(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "connectors.http1")
    async with Server(answer(PLAIN), close_idle_after=1) as server, client(server.url) as http:
        await http.get("/one")
        r = await http.post("/two", content=b"payload")
        assert r.content == JSON_BODY
        assert server.connections == 2
        assert [(r.line, r.body, r.connection) for r in server.requests] == [
            (b"GET /one HTTP/1.1", b"", 1), (b"POST /two HTTP/1.1", b"payload", 2)]
    assert "http1_stale_connection" in caplog.text


async def test_a_fresh_connection_that_fails_is_not_retried() -> None:
    async with Server(answer(keep=False)) as server, client(server.url) as http:
        with pytest.raises(httpx.RemoteProtocolError, match="closed the connection without a response"):
            await http.get("/")
        assert server.connections == 1 and len(server.requests) == 1


async def test_interim_responses_are_skipped_and_bodiless_ones_read_nothing() -> None:
    replies = iter([
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",  # the answer to a HEAD: a length, no body
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        PLAIN,
    ])
    async with Server(lambda rq, w: answer(next(replies))(rq, w)) as server, client(server.url) as http:
        assert (await http.get("/")).status_code == 204
        assert (await http.get("/")).status_code == 304
        r = await http.head("/")
        assert (r.status_code, r.content, r.headers["content-length"]) == (200, b"", "5")
        assert (await http.get("/")).content == b""
        assert (await http.get("/")).content == JSON_BODY
        assert server.connections == 1


@pytest.mark.parametrize(("response", "server_closes"), [
    (b"HTTP/1.0 200 OK\r\n\r\n%b" % JSON_BODY, True),  # HTTP/1.0 without a length: the body runs to the close
    (b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(JSON_BODY), JSON_BODY), False),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(JSON_BODY), JSON_BODY), False),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n%b" % JSON_BODY, True),  # framed by the close too
], ids=["http/1.0", "http/1.0-length", "connection-close", "until-close"])
async def test_a_response_that_ends_its_connection_is_not_reused(response: bytes, server_closes: bool) -> None:
    # A server that keeps the connection open anyway must not see a second request on it.
    async with Server(answer(response, keep=False if server_closes else None)) as server, client(server.url) as http:
        for _ in range(2):
            assert (await http.get("/")).content == JSON_BODY
        assert server.connections == 2
        await asyncio.wait_for(server.ended[1].wait(), WAIT_S)


async def test_a_request_asking_to_close_is_not_reused() -> None:
    async with Server(answer(PLAIN)) as server, client(server.url) as http:
        await http.get("/", headers={"Connection": "close"})
        await asyncio.wait_for(server.gone[1].wait(), WAIT_S)


async def test_gzip_is_decoded_by_httpx_from_the_raw_bytes() -> None:
    import gzip
    packed = gzip.compress(JSON_BODY)
    response = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%b" % (len(packed), packed)
    async with Server(answer(response)) as server, client(server.url) as http:
        assert (await http.get("/")).content == JSON_BODY


@pytest.mark.parametrize(("response", "error"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", "before the response was complete"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", "before the response was complete"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nContent-Len", "before the response was complete"),
    (b"SMTP ready\r\n\r\n", "not an HTTP/1.1 status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed response header"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "invalid Content-Length"),
    (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", "over 64 KiB"),
], ids=["cut-length", "cut-chunk", "bad-chunk", "cut-head", "not-http", "bad-header", "two-lengths", "big-head"])
async def test_a_broken_response_is_a_protocol_error(response: bytes, error: str) -> None:
    async with Server(answer(response, keep=False)) as server, client(server.url) as http:
        with pytest.raises(httpx.RemoteProtocolError, match=error):
            await http.get("/")
        assert server.connections == 1


async def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    async with Server(answer(PLAIN)) as server, client(server.url) as http:
        with pytest.raises(httpx.LocalProtocolError, match="line break"):
            await http.get("/", headers={"X-Key": "k\r\nX-Smuggled: 1"})
        assert server.requests == []


async def test_a_refused_connection_keeps_its_os_error() -> None:
    with refusing_socket() as closed:
        async with client(f"http://127.0.0.1:{port_of(closed)}") as http:
            with pytest.raises(httpx.ConnectError) as err:
                await http.get("/")
    assert isinstance(err.value.__cause__, ConnectionRefusedError)


async def test_a_silent_server_is_a_read_timeout_and_a_full_pool_a_pool_timeout() -> None:
    async def never(_: Request, writer: asyncio.StreamWriter) -> None:
        return None

    async with Server(never) as server, client(server.url, timeout=0.2,
                                               limits=httpx.Limits(max_connections=1)) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/")
        await asyncio.wait_for(server.gone[1].wait(), WAIT_S)  # the timed-out connection was closed
        first = asyncio.create_task(http.get("/", timeout=WAIT_S))
        await asyncio.wait_for(server.arrived.wait(), WAIT_S)
        with pytest.raises(httpx.PoolTimeout):
            await http.get("/")
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first


async def test_a_cancelled_request_closes_its_connection() -> None:
    async def hold(_: Request, writer: asyncio.StreamWriter) -> None:
        return None

    async with Server(hold) as server, client(server.url) as http:
        request = asyncio.create_task(http.get("/"))
        await asyncio.wait_for(server.arrived.wait(), WAIT_S)
        request.cancel()
        await asyncio.wait_for(server.gone[1].wait(), WAIT_S)


async def test_a_response_left_half_read_closes_its_connection() -> None:
    async def half(request: Request, writer: asyncio.StreamWriter) -> bool | None:
        if request.connection == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
            return None
        return await answer(PLAIN)(request, writer)

    async with Server(half) as server, client(server.url) as http:
        async with http.stream("GET", "/") as r:
            async for piece in r.aiter_raw():
                assert piece == b"hello"
                break
        await asyncio.wait_for(server.gone[1].wait(), WAIT_S)
        assert (await http.get("/")).content == JSON_BODY
        assert server.connections == 2


async def test_concurrent_requests_get_a_connection_each_then_share_them() -> None:
    everyone = asyncio.Event()

    async def together(request: Request, writer: asyncio.StreamWriter) -> bool | None:
        if len(server.requests) == 8:
            everyone.set()
        await everyone.wait()
        return await answer(PLAIN)(request, writer)

    async with Server(together) as server, client(server.url) as http:
        replies = await asyncio.gather(*(http.get(f"/{i}") for i in range(8)))
        assert [r.content for r in replies] == [JSON_BODY] * 8 and server.connections == 8
        await asyncio.gather(*(http.get(f"/{i}") for i in range(8)))
        assert server.connections == 8


async def test_closing_the_transport_closes_its_idle_connections() -> None:
    async with Server(answer(PLAIN)) as server:
        async with client(server.url) as http:
            await http.get("/")
        await asyncio.wait_for(server.gone[1].wait(), WAIT_S)


async def test_connections_have_nagle_off() -> None:
    """A request is one write and small: it must leave at once, not wait for an ACK (asyncio turns
    Nagle's algorithm off on every TCP transport; this checks it stays so for ours)."""
    transport = Http1Transport()
    async with Server(answer(PLAIN)) as server, httpx.AsyncClient(transport=transport) as http:
        assert (await http.get(server.url)).status_code == 200
        [pool] = transport._pools.values()
        [conn] = pool.idle
        assert conn.writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


# --- TLS ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_server(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def test_tls_with_a_trusted_ca(ca: trustme.CA) -> None:
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with Server(answer(PLAIN), tls=tls_server(ca)) as server, client(server.url, ssl_context=trusting) as http:
        for _ in range(3):
            assert (await http.get("/")).content == JSON_BODY
        assert server.connections == 1


async def test_tls_with_an_unknown_ca_fails_with_the_ssl_error(ca: trustme.CA) -> None:
    async with Server(answer(PLAIN), tls=tls_server(ca)) as server, client(server.url) as http:
        with pytest.raises(httpx.ConnectError) as err:
            await http.get("/")
    assert isinstance(err.value.__cause__, ssl.SSLCertVerificationError)


# --- through the model client ------------------------------------------------------------------------

REPLY = json.dumps({"id": "c1", "object": "chat.completion", "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi there"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}).encode()
MODEL_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(REPLY), REPLY)


def model_client(url: str, **kw: Any) -> OpenAIClient:
    settings: dict[str, Any] = dict(api_key="k", model="m", timeout_s=WAIT_S, max_retries=0, max_tokens=64,
                                    backoff_base_s=0.001)
    return OpenAIClient(base_url=url + "/v1", **{**settings, **kw})


async def test_the_model_client_reads_a_reply_over_the_transport() -> None:
    async with Server(answer(MODEL_OK)) as server, model_client(server.url) as model:
        for _ in range(3):
            assert (await model.complete(user("hello"), [])).text == "hi there"
        assert server.connections == 1
        assert server.requests[0].line == b"POST /v1/chat/completions HTTP/1.1"
        assert json.loads(server.requests[0].body)["messages"][-1]["content"] == "hello"


async def test_the_model_client_names_a_cut_response() -> None:
    cut = MODEL_OK[: len(MODEL_OK) - 10]
    async with Server(answer(cut, keep=False)) as server, model_client(server.url) as model:
        with pytest.raises(ModelUnavailable, match="the connection closed before a complete response"):
            await model.complete(user("hello"), [])


async def test_the_model_client_names_an_oversized_head() -> None:
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    async with Server(answer(big, keep=False)) as server, model_client(server.url) as model:
        with pytest.raises(ModelUnavailable, match="not valid HTTP.*over 64 KiB"):
            await model.complete(user("hello"), [])


async def test_the_model_client_names_a_refused_connection() -> None:
    with refusing_socket() as closed:
        async with model_client(f"http://127.0.0.1:{port_of(closed)}") as model:
            with pytest.raises(ModelUnavailable, match="connection refused"):
                await model.complete(user("hello"), [])


async def test_the_model_client_over_tls(ca: trustme.CA, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Server(answer(MODEL_OK), tls=tls_server(ca)) as server:
        async with model_client(server.url) as model:  # verified against the CA bundle: unknown CA
            with pytest.raises(ModelUnavailable, match="TLS error: CERTIFICATE_VERIFY_FAILED"):
                await model.complete(user("hello"), [])
        bundle = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(bundle))
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # httpx's context trusts it, as it would in use
        async with model_client(server.url) as model:
            assert (await model.complete(user("hello"), [])).text == "hi there"


async def test_the_model_client_times_out_a_silent_server() -> None:
    async def never(_: Request, writer: asyncio.StreamWriter) -> None:
        return None

    async with Server(never) as server, model_client(server.url, timeout_s=0.2) as model:
        with pytest.raises(ModelUnavailable, match=r"timed out after 0\.2s"):
            await model.complete(user("hello"), [])


def forwarding(request_log: list[bytes]) -> Handler:
    """A forward proxy's handler: the request (absolute-form target) goes to its origin as it came."""
    async def handle(request: Request, writer: asyncio.StreamWriter) -> bool | None:
        request_log.append(request.line)
        host, port = request.line.split(b" ")[1].split(b"/")[2].decode().rsplit(":", 1)
        reader, upstream = await asyncio.open_connection(host, int(port))
        upstream.write(request.head + request.body)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        writer.write(head + await reader.readexactly(length))
        upstream.close()
        return True
    return handle


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
async def test_an_environment_proxy_carries_the_model_requests(variable: str, no_proxy_env: pytest.MonkeyPatch) -> None:
    through: list[bytes] = []
    async with Server(answer(MODEL_OK)) as origin, Server(forwarding(through)) as proxy:
        no_proxy_env.setenv(variable, proxy.url)
        async with model_client(origin.url) as model:
            assert (await model.complete(user("hello"), [])).text == "hi there"
        assert through == [f"POST {origin.url}/v1/chat/completions HTTP/1.1".encode()]
        assert len(origin.requests) == 1

        no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
        async with model_client(origin.url) as model:
            assert (await model.complete(user("hello"), [])).text == "hi there"
        assert len(through) == 1 and len(origin.requests) == 2
