"""The SSE line scanner (gateway/llm/sse.py) against another checkout's: CPU of splitting an ordinary
stream into lines, and of an endless `data:` line (issue 39: the old scanner scanned the whole line again
at every read).

- ordinary: 20,000 events like a chat-completions delta (~120 bytes each), in 4 KB reads, as
  connectors/http1 hands them (a socket read at a time);
- endless: one `data:` line of `--endless-mb` megabytes in 64 KB reads; the new scanner stops at its
  1 MB bound (EventTooLarge), the old one reads it whole.

    .venv/bin/python bench/sse_lines.py [--before /tmp/before-39] [--endless-mb 20]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.llm import sse as current

EVENT = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" word"}}]}\n\n'


def load(root: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("sse_before", Path(root) / "gateway/llm/sse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def scan(module: ModuleType, data: bytes, size: int) -> int:
    count = 0
    try:
        async for _ in module.sse_lines(pieces(data, size)):
            count += 1
    except ValueError:  # the new scanner's bound (EventTooLarge)
        pass
    return count


def cpu(run: Callable[[], object], repeat: int) -> float:
    """The median CPU seconds of `repeat` runs."""
    times = []
    for _ in range(repeat):
        began = time.process_time()
        run()
        times.append(time.process_time() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="/tmp/before-39", help="a checkout with the old gateway/llm/sse.py")
    parser.add_argument("--endless-mb", type=int, default=20)
    args = parser.parse_args()
    before = load(args.before)
    ordinary = EVENT * 20_000
    endless = b'data: {"choices":[{"delta":{"content":"' + b"A" * (args.endless_mb * 1024 * 1024)
    for name, module in (("before", before), ("now", current)):
        ms = cpu(lambda m=module: asyncio.run(scan(m, ordinary, 4096)), 5) * 1000
        s = cpu(lambda m=module: asyncio.run(scan(m, endless, 65536)), 1)
        print(f"{name}: ordinary stream {ms:.1f} ms CPU for 20,000 events ({ms * 1000 / 20_000:.2f} µs/event); "
              f"endless {args.endless_mb} MB line {s:.2f} s CPU")


if __name__ == "__main__":
    main()
