"""The retention sweep's cost on a store that has run for months: `TriggerEvents.prune` and
`Automations.prune_runs` over a temporary SQLite store holding `--events` expired trigger events and
`--runs` automation runs (a few still claimed). The sweep runs on the store's one thread, so its time is
time every chat waits.

    .venv/bin/python bench/retention.py [--events 3000] [--runs 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from gateway.retention import AUTOMATION_RUNS_KEPT, TRIGGER_EVENTS_KEPT
from store.automations import Automations
from store.db import Store
from store.records import iso, utcnow
from store.triggers import TriggerEvents

LONG_AGO = iso(utcnow() - timedelta(days=120))


def fill(db: Any, events: int, runs: int) -> None:
    db.conn.executemany("INSERT INTO trigger_events (key, kind, payload, recorded_at) VALUES (?, 'webhook', '{}', ?)",
                        [(f"hook:a:{i}", LONG_AGO) for i in range(events)])
    db.conn.executemany(
        "INSERT INTO automation_runs (automation_id, scheduled_for, started_at, status) VALUES ('a', ?, ?, ?)",
        [(f"{LONG_AGO}#hook:a:{i}", LONG_AGO, "claimed" if i % 10_000 == 0 else "delivered") for i in range(runs)])


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store(Path(tmp) / "anyy.db").open()
        try:
            await store.write(lambda db: fill(db, args.events, args.runs))
            start = time.perf_counter()
            events = await TriggerEvents(store).prune(TRIGGER_EVENTS_KEPT)
            between = time.perf_counter()
            runs = await Automations(store).prune_runs(AUTOMATION_RUNS_KEPT)
            end = time.perf_counter()
        finally:
            await store.close()
    print(f"{args.events:,} expired events, {args.runs:,} runs: events swept {events:,} in "
          f"{(between - start) * 1e3:.1f} ms; runs swept {runs:,} in {(end - between) * 1e3:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=50_000)
    asyncio.run(main(parser.parse_args()))
