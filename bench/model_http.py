"""CPU of the model client per request: the event loop's thread CPU time of N sequential completions
against the local fake model (tests/fixtures/model.py, which runs in its own thread and is not counted),
whole or streamed (the echo reply is ~50 streamed events). Everything between `complete()` and the reply
is counted: httpx, the transport, the JSON, the SSE parsing, the retry wrapper.

    .venv/bin/python bench/model_http.py [--requests 1000] [--stream]
    PYTHONPATH=/tmp/before-main .venv/bin/python bench/model_http.py   # another checkout's client
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

# The fake model is tests/fixtures/model.py, which the editable install does not map: this tree's root goes
# last on the path, so a PYTHONPATH naming another checkout still wins.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from gateway.llm import ChatMessage, OpenAIClient
from tests.fixtures.model import start_fake_model


async def measure(requests: int, stream: bool) -> tuple[float, float]:
    """CPU and wall milliseconds per request, after a warm-up of 50."""
    fake = start_fake_model()
    try:
        async with OpenAIClient(fake.url_openai, "k", "m", 30, 0, 256) as client:
            messages = [ChatMessage(role="system", content="Be brief."),
                        ChatMessage(role="user", content="hello " * 50)]

            async def sink(_: str) -> None:
                pass

            for _ in range(50):
                await client.complete(messages, [], on_text=sink if stream else None)
            cpu, wall = time.thread_time(), time.perf_counter()
            for _ in range(requests):
                await client.complete(messages, [], on_text=sink if stream else None)
            return ((time.thread_time() - cpu) / requests * 1000, (time.perf_counter() - wall) / requests * 1000)
    finally:
        fake.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--stream", action="store_true")
    args = ap.parse_args()
    cpu, wall = asyncio.run(measure(args.requests, args.stream))
    tree = os.path.dirname(sys.modules["gateway"].__path__[0])
    print(f"tree={tree} stream={args.stream} requests={args.requests}: {cpu:.3f} ms CPU per request "
          f"(wall {wall:.3f} ms); load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
