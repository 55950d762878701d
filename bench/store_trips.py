"""Store round trips of a turn: which ones, and what each costs.

Runs bench/turn_overhead.py's console turns (the real Gateway, SQLite, the fake model in its own process)
with every `Store.run` noted: a round trip to the store's thread. For each, the function that asked for
it, and its time in three parts: from the call until the store's thread starts it, the work there, and
the hand-back until the caller resumes. With `--pause S` every turn follows S seconds of sleep, as each
anyy turn in bench/peers.py follows the peers' turns (a "cold" turn: idle CPUs to wake, cold caches).

    .venv/bin/python bench/store_trips.py [--turns 120] [--pause 0.1] [--tree DIR]

`--tree` measures another checkout's code (its bench/turn_overhead.py and its packages), for a before/after.

Prints the trips of the commonest plain turn (medians over those turns), their sum, and the turn's wall
time (model time included).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WARMUP = 20  # bench/turn_overhead.py's warm-up turns
Trip = tuple[str, float, float, float]  # who asked, to the thread / work / back (µs)
trips: list[Trip] = []
turns: list[tuple[list[Trip], float]] = []  # each turn's trips and wall time (ms)


def _asker() -> str:
    """The first function outside the store's and the batcher's own code that led to this trip."""
    for frame in reversed(traceback.extract_stack(limit=12)[:-2]):
        if "/store/db.py" not in frame.filename and "/store/batch.py" not in frame.filename:
            return frame.name
    return "?"


def count_trips(store_class: Any) -> None:
    """Wrap `Store.run` (every trip goes through it) to time each trip in its three parts."""
    run = store_class.run

    async def timed(store: Any, fn: Any) -> Any:
        asker, on_thread = _asker(), []

        def work(db: Any) -> Any:
            on_thread.append(time.perf_counter())
            try:
                return fn(db)
            finally:
                on_thread.append(time.perf_counter())

        called = time.perf_counter()
        try:
            return await run(store, work)
        finally:
            if len(on_thread) == 2:
                start, end = on_thread
                trips.append((asker, (start - called) * 1e6, (end - start) * 1e6, (time.perf_counter() - end) * 1e6))

    store_class.run = timed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=120)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds of sleep before each turn")
    ap.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to measure")
    args = ap.parse_args(argv)
    tree = args.tree.resolve()
    sys.path[:0] = [str(tree), str(tree / "bench")]
    import turn_overhead

    from store.db import Store

    count_trips(Store)
    pause = args.pause

    class Console(turn_overhead.ConsoleSurface):
        async def send_line(self, line: str) -> None:
            time.sleep(pause)  # the whole process sleeps, as it waits for its turn in bench/peers.py
            trips.clear()
            self.started = time.perf_counter()
            await super().send_line(line)

    class Gateway(turn_overhead.Gateway):
        async def idle(self) -> None:
            await super().idle()
            console = next(s for s in self.surfaces if isinstance(s, Console))
            if trips:  # not the idle() of stop()
                turns.append((list(trips), (time.perf_counter() - console.started) * 1000))

    turn_overhead.ConsoleSurface = Console  # type: ignore[misc]
    turn_overhead.Gateway = Gateway  # type: ignore[misc]
    asyncio.run(turn_overhead.main(args.turns, stream=False))
    measured = turns[WARMUP:]
    plain = [t for i, t in enumerate(measured, WARMUP) if i % 4]  # turn_overhead's mix: every fourth calls a tool
    shape = Counter(tuple(name for name, *_ in t) for t, _ in plain).most_common(1)[0][0]
    same = [t for t in plain if tuple(name for name, *_ in t[0]) == shape]
    tool = [len(t) for i, (t, _) in enumerate(measured, WARMUP) if not i % 4]
    print(f"\nstore round trips, pause {pause} s before each turn: a plain turn {len(shape)} "
          f"({len(same)} of {len(plain)} plain turns alike), a tool turn {statistics.median(tool):.0f}")
    print(f"{'trip (asked by)':<22} {'total':>7} {'to thread':>10} {'work':>7} {'back':>7}   µs, medians")
    for index, name in enumerate(shape):
        parts = [statistics.median(t[index][k] for t, _ in same) for k in (1, 2, 3)]
        print(f"{name:<22} {sum(parts):>7.0f} {parts[0]:>10.0f} {parts[1]:>7.0f} {parts[2]:>7.0f}")
    total = statistics.median(sum(a + b + c for _, a, b, c in t) for t, _ in same)
    wall = statistics.median(w for _, w in same)
    print(f"sum {total:.0f} µs; turn wall time (model time included) p50 {wall:.2f} ms")


if __name__ == "__main__":
    main()
