"""The fake model as a separate process for benchmarks, answering by rule instead of by script:
a user message starting "add a task" gets a task_create call, a tool result gets "Added.", anything
else gets a reply of a typical length for a chat assistant (about 400 characters). Prints its OpenAI
base URL, then serves until terminated.

With ANYY_BENCH_MODEL_TIMES=<file> in its environment it also notes, per request, when the request
reached it and when its response was finished (CLOCK_MONOTONIC seconds, comparable across processes on
Linux), and writes them to that file as JSON on exit: bench/peers.py subtracts this "model time" from
each agent's turns the same way whichever client the agent uses.

    python bench/fake_model_server.py [--delay 0.3]   # each answer starts after 0.3 s (default: at once)
        [--answer-chars 20]  # a short chat's answers: the quote and 20 characters
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web

from tests.fixtures.model import FakeModel, start_fake_model
from tests.support.model_stream import Pace
from tests.support.model_wire import Step, last_user_text, reply, tool_call

ANSWER = "here is a reasonably detailed answer sentence. " * 8  # a typical chat assistant's length


def by_rule(body: dict[str, Any], answer: str = ANSWER) -> Step:
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return reply("Added.")
    text = last_user_text(body) or ""
    if text.startswith("add a task"):
        return tool_call("task_create", {"title": text.removeprefix("add a task ").strip() or "task"})
    return reply(f"About '{text[:40]}': " + answer)


class TimedFakeModel(FakeModel):
    """The fake, noting each request's arrival and the end of its response. FakeModel has no hook at the
    end of a response, so this wraps its handler and finishes the response itself (aiohttp then sees it
    sent and sends nothing more)."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[tuple[float, float]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        start = time.monotonic()
        response = await super()._handle(request)
        if not response.prepared:
            await response.prepare(request)
            await response.write_eof()
        self.spans.append((start, time.monotonic()))
        return response


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer starts (the model's latency)")
    ap.add_argument("--answer-chars", type=int, help="the answer's length after its quote (default: about 400)")
    args = ap.parse_args()
    answer = ANSWER if args.answer_chars is None else ("ok. " * args.answer_chars)[:args.answer_chars]
    times_file = os.environ.get("ANYY_BENCH_MODEL_TIMES")
    fake = TimedFakeModel().start() if times_file else start_fake_model()
    fake.responder = lambda body: by_rule(body, answer)
    fake.pace = Pace(first_token_s=args.delay)
    print(fake.url_openai, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    fake.stop()
    if isinstance(fake, TimedFakeModel):
        Path(times_file or "").write_text(json.dumps(fake.spans))


if __name__ == "__main__":
    main()
