"""Automation benchmark: firing lateness of many reminders due together, and start-up with many rows.

Both use the real service, store (a temporary SQLite file) and outbox.

* lateness: N one-shot reminders due within the same few seconds; lateness is the time from a
  reminder's slot to its outbox row being written. Target: p99 <= 1 s.
* start-up: M stored automations (a mix of one-shot, interval and cron); the time `start()` takes to
  rebuild the scheduler from the rows. Target: <= 2 s for 10,000.

    .venv/bin/python bench/automations.py [--reminders 200] [--spread 3] [--stored 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.automations.scheduler import AutomationService
from store.db import Store
from store.outbox import Outbox
from store.records import Origin, Outbound, parse_iso, utcnow
from toolsets.schedule import Cron, Interval, Once, Reminder, ScheduleModel

TZ = ZoneInfo("Europe/Berlin")
CHAT = Origin(surface="telegram", chat_id="100")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def lateness(directory: Path, count: int, spread_s: float) -> dict[str, float]:
    async with Store(directory / "lateness.db") as store:
        outbox = Outbox(store)
        lags: list[float] = []
        done = asyncio.Event()

        async def enqueue(outbound: Outbound, key: str) -> int:
            item = await outbox.enqueue(outbound, key)
            lags.append((utcnow() - parse_iso(key.split(":", 2)[2])).total_seconds())
            if len(lags) == count:
                done.set()
            return item

        service = AutomationService(store, TZ, enqueue)
        await service.start()
        first_due = utcnow() + timedelta(seconds=3)  # after all of them are created
        for i in range(count):
            at = first_due + timedelta(seconds=spread_s * i / count)
            await service.create("telegram:1", CHAT, f"r{i}", Once(type="once", at=at),
                                 Reminder(kind="reminder", text=f"reminder {i}"))
        await asyncio.wait_for(done.wait(), 30 + spread_s)
        await service.shutdown()
    return {"p50_s": percentile(lags, 0.5), "p99_s": percentile(lags, 0.99), "max_s": max(lags),
            "mean_s": statistics.fmean(lags)}


def mixed_schedule(i: int) -> ScheduleModel:
    kind = i % 3
    if kind == 0:
        return Once(type="once", at=utcnow() + timedelta(days=1, minutes=i))
    if kind == 1:
        return Interval(type="every", mode="interval", interval=f"{30 + i % 90}m")
    return Cron(type="every", mode="cron", cron=f"{i % 60} {i % 24} * * 1-5")


async def startup(directory: Path, count: int) -> dict[str, float]:
    async with Store(directory / "startup.db") as store:
        outbox = Outbox(store)
        admin = AutomationService(store, TZ, outbox.enqueue)
        began = time.perf_counter()
        for i in range(count):
            await admin.create(f"telegram:{i % 50}", CHAT, f"a{i}", mixed_schedule(i),
                               Reminder(kind="reminder", text=f"automation {i}"))
        created_s = time.perf_counter() - began
        service = AutomationService(store, TZ, outbox.enqueue)
        began = time.perf_counter()
        await service.start()
        start_s = time.perf_counter() - began
        await service.shutdown()
    return {"stored": count, "start_s": start_s, "create_each_ms": created_s / count * 1000}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reminders", type=int, default=200)
    parser.add_argument("--spread", type=float, default=3.0, help="seconds over which the reminders fall due")
    parser.add_argument("--stored", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        late = await lateness(Path(tmp), args.reminders, args.spread)
        print(f"lateness  reminders={args.reminders} spread_s={args.spread} "
              + " ".join(f"{k}={v:.3f}" for k, v in late.items()))
        boot = await startup(Path(tmp), args.stored)
        print(f"startup   stored={boot['stored']} start_s={boot['start_s']:.3f} "
              f"create_each_ms={boot['create_each_ms']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
