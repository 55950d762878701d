"""bench/peers.py's guard (issue 36): the side-by-side ratio against nanobot and Hermes is no longer a
target, but it must not fall below GUARD_RATIOS, and anyy's warm p50 must stay at most WARM_P50_MS.
`guard_checks` decides from the figures alone (tests/test_bench_peers.py); `warm_p50` measures the warm
figure with bench/turn_overhead.py in fresh processes."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The guard (issue 36): the least each peer's p50 over anyy's may be, and the most anyy's warm p50 may be.
GUARD_RATIOS = {"nanobot": 20.0, "hermes": 15.0}
WARM_P50_MS = 3.0
WARM_RUNS = 3
WARM_TURNS = 400  # bench/turn_overhead.py's default


@dataclass(frozen=True)
class Check:
    """One guard: the figure measured and its bound, a floor (`at_least`) or a ceiling. A figure that is
    NaN (not measured) holds neither way."""

    what: str
    value: float
    bound: float
    at_least: bool
    unit: str

    @property
    def holds(self) -> bool:
        return self.value >= self.bound if self.at_least else self.value <= self.bound

    def line(self) -> str:
        rule = f"{'>=' if self.at_least else '<='} {self.bound:g}{self.unit}"
        return f"guard {self.what}: {self.value:.2f}{self.unit} (must be {rule}): {'holds' if self.holds else 'FAILS'}"


def guard_checks(anyy_p50: float, peers_p50: dict[str, float], warm_p50: float | None) -> list[Check]:
    """The guard's verdict from the figures alone: each peer's p50 over anyy's (the lockstep's cold
    turns, anyy not streamed) against GUARD_RATIOS, and anyy's warm p50 (ms) against WARM_P50_MS. A peer
    or the warm figure missing fails its check rather than passing unmeasured."""
    checks = []
    for name, least in GUARD_RATIOS.items():
        theirs = peers_p50.get(name)
        ratio = theirs / anyy_p50 if theirs is not None and anyy_p50 > 0 else float("nan")
        checks.append(Check(f"{name} / anyy p50", ratio, least, at_least=True, unit="x"))
    warm = float("nan") if warm_p50 is None else warm_p50
    checks.append(Check("anyy warm p50, reply on screen", warm, WARM_P50_MS, at_least=False, unit=" ms"))
    return checks


def warm_p50(env: dict[str, str], runs: int = WARM_RUNS, turns: int = WARM_TURNS) -> tuple[float, list[float]]:
    """anyy's warm p50 overhead until the reply is on screen: bench/turn_overhead.py alone (turn after
    turn, not streamed), `runs` times in fresh processes; the median of their p50s, and each."""
    code = ("import asyncio, json, sys; sys.path.insert(0, sys.argv[1]); import turn_overhead; "
            "print(json.dumps(asyncio.run(turn_overhead.main(int(sys.argv[2]), stream=False))))")
    p50s = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code, str(ROOT / "bench"), str(turns)], env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench/turn_overhead.py failed:\n{done.stderr[-2000:]}")
        p50s.append(float(json.loads(done.stdout.strip().splitlines()[-1])["visible_p50"]))
    return statistics.median(p50s), p50s
