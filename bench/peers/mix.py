"""What every driver shares: bench/turn_overhead.py's message mix, for the drivers that run in a peer's
venv (which cannot import the gateway; bench/peers.py checks that anyy's run sent exactly these messages,
so the two cannot drift apart silently), the turn-by-turn lockstep, and the result file. Plain standard
library: it runs under the peers' Pythons."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path


def message(i: int) -> str:
    """Turn i's message: one in four asks for a task (the fake answers with a task_create call)."""
    return (f"add a task number {i}" if i % 4 == 0 else
            f"message {i}: could you tell me a bit more about the plan for the weekend?")


def write_result(out: Path, spans: list[tuple[float, float]], cpu_s: float, **extra: object) -> None:
    """What a driver hands back: each turn's (start, end) on CLOCK_MONOTONIC, the process's CPU over the
    measured turns, its peak RSS and whatever the driver wants to say about its setup."""
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.write_text(json.dumps({"spans": spans, "cpu_s": cpu_s, "rss_mb": rss_mb,
                               "python": sys.version.split()[0], **extra}))


def cpu_now() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


now = time.monotonic


class Lockstep:
    """Lets bench/peers.py alternate the agents turn by turn, so a change in the machine's load falls on
    all of them alike: each turn waits for a byte on one pipe and reports its end on another (their file
    descriptors in ANYY_BENCH_LOCKSTEP="go,done"). Without that variable the driver runs freely."""

    def __init__(self) -> None:
        fds = os.environ.get("ANYY_BENCH_LOCKSTEP")
        self._go, self._done = (int(fd) for fd in fds.split(",")) if fds else (-1, -1)
        self._ready = False

    def before_turn(self) -> None:
        if self._go < 0:
            return
        if not self._ready:  # the first turn: say the agent is set up, then wait like every turn
            os.write(self._done, b"r")
            self._ready = True
        if os.read(self._go, 1) != b"g":
            raise SystemExit("bench/peers.py went away")

    def after_turn(self) -> None:
        if self._done >= 0:
            os.write(self._done, b"d")
