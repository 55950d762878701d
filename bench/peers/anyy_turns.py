"""Drives anyy for bench/peers.py: bench/turn_overhead.py's own run (the real Gateway with a console
surface, SQLite store, default config; replies streamed only if "stream" is given), reused as it is,
with the start and end of each turn stamped so the fake's model time can be subtracted the same way as
for the peers. The stamps come
from subclasses handed to turn_overhead through its module globals: a turn starts when the console hands
the line to the gateway and ends when `Gateway.idle()` returns, which is where turn_overhead's own
timing starts and stops. It also checks that turn_overhead sent bench/peers/mix.py's messages.

    PYTHONPATH=<tree> .venv/bin/python bench/peers/anyy_turns.py TURNS [stream] OUT.json

The fake model is started by turn_overhead itself; with ANYY_BENCH_MODEL_TIMES set it notes its
model time in that file.
"""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import turn_overhead  # noqa: E402
from mix import Lockstep, cpu_now, message, now, write_result  # noqa: E402

WARMUP = 20  # turn_overhead's warm-up turns
sent: list[str] = []
starts: list[tuple[float, float]] = []  # (monotonic, CPU seconds) at each turn's start
ends: list[tuple[float, float]] = []
step = Lockstep()


class StampedConsole(turn_overhead.ConsoleSurface):
    async def send_line(self, line: str) -> None:
        step.before_turn()
        sent.append(line)
        starts.append((now(), cpu_now()))
        await super().send_line(line)


class StampedGateway(turn_overhead.Gateway):
    async def idle(self) -> None:
        await super().idle()
        if len(ends) < len(starts):  # only the idle() that ends a turn, not the one in stop()
            ends.append((now(), cpu_now()))
            step.after_turn()


def main(turns: int, out: Path, stream: bool) -> None:
    turn_overhead.ConsoleSurface = StampedConsole  # type: ignore[misc]
    turn_overhead.Gateway = StampedGateway  # type: ignore[misc]
    # Its own printed figures count the waits between lockstepped turns too: only the stamps are used.
    asyncio.run(turn_overhead.main(turns, stream=stream))
    expected = [message(i) for i in range(turns + WARMUP)]
    if sent != expected:
        raise SystemExit("bench/turn_overhead.py's messages differ from bench/peers/mix.py's: update mix.py")
    spans = [(s[0], e[0]) for s, e in zip(starts[WARMUP:], ends[WARMUP:], strict=True)]
    write_result(out, spans, ends[-1][1] - starts[WARMUP][1], agent="anyy", version=version("anyy"),
                 streamed=stream)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[-1]), "stream" in sys.argv[2:-1])
