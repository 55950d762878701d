"""`/remind` phrase grammar: its import cost (paid by every `anyy` process that can take a /remind) and
the time to read one phrase, against what a general date parser would cost to import.

* import: `python -X importtime`'s cumulative time for `gateway.automations.when` (its regular
  expressions compile at import) after what it stands on (`toolsets.schedule`, which every `anyy`
  process loads anyway), median of N fresh processes; dateparser's for comparison.
* parse: `parse_when` over a mix of English and Chinese phrases, per phrase.

    .venv/bin/python bench/remind_phrases.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.automations.when import parse_when

PHRASES = ["10min stretch", "in 10 minutes tea", "1h30 oven", "friday 9:30 review", "tomorrow 9am dentist",
           "10分钟后喝水", "明天上午9点半 开会", "周五下午3:30 复盘", "2026-12-01 09:00 x", "next mon at 8 gym"]


def import_us(module: str, after: str, runs: int) -> float:
    """Median cumulative import time of `module` (µs, from `python -X importtime`) in a fresh process
    that has imported `after` first: the module's own cost, not its already-loaded dependencies'."""
    times = []
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {after}\nimport {module}"],
                             check=True, capture_output=True, text=True).stderr
        line = [x for x in err.splitlines() if x.rstrip().endswith(f"| {module}")][-1]
        times.append(float(line.split("|")[1]))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    grammar = import_us("gateway.automations.when", "toolsets.schedule, gateway.config", args.runs)
    print(f"import gateway.automations.when: {grammar / 1000:.1f} ms (its dependencies already loaded), "
          f"median of {args.runs}")
    try:
        dateparser = import_us("dateparser", "sys", args.runs)
        print(f"import dateparser (for comparison): {dateparser / 1000:.0f} ms")
    except subprocess.CalledProcessError:
        print("import dateparser: not installed")
    now, tz = datetime.now(ZoneInfo("Europe/Berlin")), ZoneInfo("Europe/Berlin")
    rounds = 2000
    t = time.perf_counter()
    for _ in range(rounds):
        for phrase in PHRASES:
            parse_when(phrase, now, tz)
    per = (time.perf_counter() - t) / (rounds * len(PHRASES))
    print(f"parse_when: {per * 1e6:.1f} µs per phrase ({len(PHRASES)} phrases × {rounds})")


if __name__ == "__main__":
    main()
