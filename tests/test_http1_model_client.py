"""The model client over its HTTP/1.1 transport: what a person reads when the server misbehaves, TLS
with httpx's CA bundle (and SSL_CERT_FILE), and environment proxies, which httpx's own transport carries."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import trustme

from gateway.llm import ModelUnavailable, OpenAIClient
from tests.support.ports import port_of, refusing_socket
from tests.support.raw_http import Handler, Request, Server, answer, tls_server
from tests.test_llm import user

WAIT_S = 5


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


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
        with pytest.raises(ModelUnavailable, match=r"not valid HTTP.*over 64 KiB"):
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
