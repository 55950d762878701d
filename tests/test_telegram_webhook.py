"""The Telegram webhook receiver: the secret is checked before the body is read, and the body is capped.

A raw HTTP client on 127.0.0.1 streams the body in chunks, so the test process never holds it; the
server's peak memory is measured with the kernel's high-water mark (reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.surfaces.telegram.webhook import BODY_LIMIT
from tests.support.telegram_api import FakeBot
from tests.support.telegram_port import RecordingPort, running

SECRET = "hook-Secret_2"
HUGE = 90 * 1024 * 1024
CHUNK = b" " * (1024 * 1024)


def _status_kb(key: str) -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


@contextlib.contextmanager
def peak_rss_growth() -> Iterator[list[int]]:
    """Yields a list that receives the peak RSS growth (bytes) over the block."""
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark restarts from the current RSS
    before = _status_kb("VmRSS")
    out: list[int] = []
    yield out
    out.append((_status_kb("VmHWM") - before) * 1024)


async def raw_post(port: int, path: str, body_size: int, *, secret: str | None, chunked: bool = False,
                   body: bytes | None = None) -> tuple[int, int]:
    """POST `body` (or `body_size` spaces, streamed) and return (status, bytes sent before the answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    if secret is not None:
        head.append(f"X-Telegram-Bot-Api-Secret-Token: {secret}")
    size = len(body) if body is not None else body_size
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    answer = asyncio.create_task(reader.readline())
    sent = 0
    try:
        if body is not None:
            writer.write(body)
            sent = len(body)
        else:
            while sent < body_size and not answer.done():
                piece = CHUNK[: body_size - sent]
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                await writer.drain()
                sent += len(piece)
        if chunked and not answer.done():
            writer.write(b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        pass  # the server closed after answering: what a refused upload looks like
    status_line = await asyncio.wait_for(answer, 10)
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return int(status_line.split()[1]), sent


@contextlib.asynccontextmanager
async def hook(tg: FakeBot, tmp_path: Path, http_port: int,
               monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RecordingPort]:
    monkeypatch.setenv("ANYY_TEST_TG_SECRET", SECRET)
    async with running(tg, tmp_path, mode="webhook", webhook_url=f"http://127.0.0.1:{http_port}/tg/hook",
                       port=http_port, secret_token_env="ANYY_TEST_TG_SECRET") as (surface, port):
        assert surface.status() == "up"
        yield port


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_90_mb_unauthenticated_body_is_refused_without_buffering_it(
        tg: FakeBot, tmp_path: Path, unused_tcp_port: int, monkeypatch: pytest.MonkeyPatch, chunked: bool) -> None:
    async with hook(tg, tmp_path, unused_tcp_port, monkeypatch) as port:
        with peak_rss_growth() as growth:
            status, _ = await raw_post(unused_tcp_port, "/tg/hook", HUGE, secret="wrong", chunked=chunked)
        assert status == 403
        assert growth[0] < 20 * 1024 * 1024, f"peak RSS grew by {growth[0] // 1024} KB"
        assert port.inbounds == []


async def test_an_authenticated_body_past_the_cap_is_refused(tg: FakeBot, tmp_path: Path, unused_tcp_port: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    async with hook(tg, tmp_path, unused_tcp_port, monkeypatch) as port:
        with peak_rss_growth() as growth:
            declared, _ = await raw_post(unused_tcp_port, "/tg/hook", HUGE, secret=SECRET)
            streamed, _ = await raw_post(unused_tcp_port, "/tg/hook", HUGE, secret=SECRET, chunked=True)
        assert (declared, streamed) == (413, 413)
        assert growth[0] < 20 * 1024 * 1024, f"peak RSS grew by {growth[0] // 1024} KB"
        assert port.inbounds == []


async def test_the_right_secret_and_a_normal_update_work(tg: FakeBot, tmp_path: Path, unused_tcp_port: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    async with hook(tg, tmp_path, unused_tcp_port, monkeypatch) as port:
        update = json.dumps(tg.message("hello via the hook", inject=False)).encode()
        assert len(update) < BODY_LIMIT
        assert (await raw_post(unused_tcp_port, "/tg/hook", 0, secret=SECRET, body=update))[0] == 200
        assert [i.text for i in port.inbounds] == ["hello via the hook"]  # recorded before the 200
        assert (await raw_post(unused_tcp_port, "/tg/hook", 0, secret=SECRET, body=b"[1, 2]"))[0] == 400
        assert (await raw_post(unused_tcp_port, "/tg/hook", 0, secret=None, body=update))[0] == 403
        assert len(port.inbounds) == 1 and port.duplicates == []
