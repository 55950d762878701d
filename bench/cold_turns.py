"""Cold turns: anyy's overhead per turn as bench/peers.py counts it, without the peers.

In bench/peers.py every anyy turn follows 100-170 ms of the other agents' turns, so it starts cold (idle
CPUs to wake, caches others used). This runs one or more checkouts' anyy (bench/peers/anyy_turns.py,
bench/turn_overhead.py's turns) in the same lockstep with a sleep before every turn instead, and applies
the same subtraction of the fake model's own time: a quick before/after of what that goal measures, each
tree in the same run (give one tree twice to see the noise).

    .venv/bin/python bench/cold_turns.py [--turns 100] [--pause 0.1] TREE [TREE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import WARMUP_TURNS, Driver, pct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--pause", type=float, default=0.1, help="seconds of sleep before each turn")
    ap.add_argument("trees", type=Path, nargs="+", help="checkouts whose anyy takes turns, in this order")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="anyy-cold-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HOME": str(work / "home")}
        drivers = []
        for n, tree in enumerate(t.resolve() for t in args.trees):
            argv = [sys.executable, str(tree / "bench" / "peers" / "anyy_turns.py"), str(args.turns)]
            drivers.append(Driver(f"{n}:{tree.name}", argv, {**env, "PYTHONPATH": str(tree)}, work, fake=False))
        try:
            for d in drivers:
                d.wait_for(b"r")
            load = os.getloadavg()[0]
            for i in range(WARMUP_TURNS + args.turns):
                for d in drivers[i % len(drivers):] + drivers[:i % len(drivers)]:
                    time.sleep(args.pause)
                    d.turn()
            runs = {d.name: d.finish() for d in drivers}
        except BaseException:
            for d in drivers:
                d.kill()
            raise
    print(f"overhead per turn after {args.pause} s of sleep, {args.turns} turns (load {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}):")
    for name, r in runs.items():
        overhead = r["overhead_ms"]
        print(f"{name:<28} p50 {statistics.median(overhead):6.2f} ms  p90 {pct(overhead, 90):6.2f} ms  "
              f"CPU per turn {r['cpu_s'] * 1000 / len(r['spans']):6.2f} ms")


if __name__ == "__main__":
    main()
