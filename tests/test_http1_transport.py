"""The HTTP/1.1 transport (connectors/http1.py) under httpx against raw servers on 127.0.0.1
(tests/support/raw_http.py): framing, keep-alive, stale connections, errors, cancellation, TLS."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from typing import Any

import httpx
import pytest
import trustme

from connectors.http1 import Http1Transport
from tests.support.ports import port_of, refusing_socket
from tests.support.raw_http import Request, Server, answer, settle, tls_server

WAIT_S = 5


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


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


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
