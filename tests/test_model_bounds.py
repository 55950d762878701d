"""Issue 39: a model endpoint cannot swell the process or hold a turn. A whole answer is read up to 16 MB,
one SSE line or event up to 1 MB (scanned once, as it arrives), `timeout_s` bounds the gap between pieces
and `stream_max_s` a whole streamed answer; past a bound the turn ends with a clear error.

Memory and CPU are measured on a real `anyy chat` subprocess (through a wrapper reading its rusage)
against a raw HTTP server on 127.0.0.1 writing a body too big to hold; the time bounds in process."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.llm import ModelUnavailable, OpenAIClient
from gateway.llm.types import ModelCutOff
from tests.support.cli import ANYY, SUBPROCESS_S, write_config
from tests.support.raw_http import Handler, Request, Server
from tests.test_llm import user

MB = 1024 * 1024
# Runs a command and reports its peak RSS and CPU time: the children's rusage, the command the only child.
_MEASURED = ("import resource, subprocess, sys\n"
             "code = subprocess.run(sys.argv[1:]).returncode\n"
             "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "print(f'peak_kb={used.ru_maxrss} cpu_s={used.ru_utime + used.ru_stime:.1f}', file=sys.stderr)\n"
             "sys.exit(code)\n")


def flood(head: bytes, start: bytes, total_mb: int, sent: list[int], end: bytes = b"") -> Handler:
    """Write `head`, `start`, `total_mb` megabytes of "A" (counted in `sent`), `end`; or until the client goes."""
    async def handle(_: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + start)
        piece = b"A" * MB
        for _ in range(total_mb):
            writer.write(piece)
            await writer.drain()
            sent[0] += MB
        writer.write(end)
        return False
    return handle


async def chat_measured(tmp_path: Path, home: dict[str, str], url: str, more: str = "") -> tuple[str, int, float]:
    """One `anyy chat` turn against the model at `url`: (its output, peak RSS in MB, CPU seconds)."""
    cfg = write_config(tmp_path, f'[model]\nbase_url = "{url}/v1"\nmodel = "fake-1"\ntimeout_s = 60\n'
                                 f"max_retries = 0\n{more}")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _MEASURED, *ANYY, "chat", "--config", cfg,
                                                env=home, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(b"hello\n"), SUBPROCESS_S)
    line = err.decode().strip().splitlines()[-1]
    fields = dict(part.split("=") for part in line.split())
    return out.decode() + err.decode(), int(fields["peak_kb"]) // 1024, float(fields["cpu_s"])


async def test_a_huge_answer_ends_the_turn_and_the_process_stays_small(tmp_path: Path, home: dict[str, str]) -> None:
    sent = [0]
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (300 * MB + 11)
    async with Server(flood(head, b'{"pad": "', 300, sent, b'"}')) as server:
        out, peak_mb, _ = await chat_measured(tmp_path, home, server.url, "[runtime]\nstream = false\n")
    assert "sent an answer larger than 16 MB" in out, out[-2000:]
    assert peak_mb < 250, f"anyy chat peaked at {peak_mb} MB reading the answer"
    assert sent[0] < 100 * MB  # it stopped reading, and the server saw it go


async def test_an_endless_sse_line_ends_the_turn_cheaply(tmp_path: Path, home: dict[str, str]) -> None:
    sent = [0]
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    async with Server(flood(head, b'data: {"choices": [{"index": 0, "delta": {"content": "', 100, sent)) as server:
        out, peak_mb, cpu_s = await chat_measured(tmp_path, home, server.url)
    assert "a line of the stream is longer than 1 MB" in out, out[-2000:]
    assert peak_mb < 250, f"anyy chat peaked at {peak_mb} MB reading the stream"
    assert cpu_s < 15, f"anyy chat spent {cpu_s} s of CPU"  # starting costs 2-4 s; a re-scan of 100 MB was 36 s
    assert sent[0] < 50 * MB


def client(url: str, **kw: Any) -> OpenAIClient:
    settings: dict[str, Any] = dict(api_key="k", model="m", timeout_s=1, max_retries=2, max_tokens=64,
                                    backoff_base_s=0.001)
    return OpenAIClient(base_url=url + "/v1", **{**settings, **kw})


def drip(piece: bytes, every_s: float) -> Handler:
    """An SSE stream that sends `piece` every `every_s` seconds, forever: each gap is short, the whole endless."""
    async def handle(_: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        while True:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(every_s)
    return handle


TEXT_EVENT = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'


@pytest.mark.parametrize(("piece", "raised"), [(TEXT_EVENT, ModelCutOff), (b": keep-alive\n", ModelUnavailable)],
                         ids=["text", "comments"])
async def test_a_slow_drip_stream_ends_at_its_total_cap(piece: bytes, raised: type[Exception]) -> None:
    async with Server(drip(piece, 0.2)) as server, client(server.url, stream_max_s=1.5) as model:
        began = time.monotonic()
        with pytest.raises(raised, match=r"took longer than 1\.5s") as caught:
            await asyncio.wait_for(model.complete(user("x"), [], on_text=lambda _: asyncio.sleep(0)), 10)
        took = time.monotonic() - began
    assert 1.5 <= took < 4.0  # the cap, and some slack for a loaded machine
    assert type(caught.value) is raised and len(server.requests) == 1  # a cap is not retried


async def test_an_event_of_many_lines_over_the_cap_is_refused() -> None:
    line = b"data: " + b"x" * 1000 + b"\n"
    body = line * 1100 + b"\n"  # one event of 1.1 MB of data, no line over the cap
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(body)

    async def handle(_: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + body)
        await writer.drain()
        return False

    async with Server(handle) as server, client(server.url) as model:
        with pytest.raises(ModelUnavailable, match="an event of the stream is longer than 1 MB") as caught:
            await model.complete(user("x"), [], on_text=lambda _: asyncio.sleep(0))
    assert not isinstance(caught.value, ModelCutOff) and len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_error_answer_is_read_only_as_far_as_its_message(stream: bool) -> None:
    sent = [0]
    error = json.dumps({"error": {"message": "model overloaded, try later"}, "pad": ""})[:-2].encode()
    head = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (300 * MB)
    async with Server(flood(head, error, 300, sent)) as server, client(server.url, timeout_s=30) as model:
        with pytest.raises(ModelUnavailable, match="HTTP 400 Bad Request") as caught:
            await model.complete(user("x"), [], on_text=(lambda _: asyncio.sleep(0)) if stream else None)
    assert "Bad Request" in str(caught.value)
    assert sent[0] < 50 * MB
