"""Several residents on one PostgreSQL (docs/scale.md): what it costs and what it carries.

Starts a private PostgreSQL cluster (tests/support/postgres.py: Debian's server binaries, a temporary
directory, 127.0.0.1), then measures, in the same run:

* turn overhead on SQLite and on PostgreSQL: bench/turn_overhead.py's console turns, same machine,
  same fake model, one after the other;
* reminders fired per second across two processes: N one-shot reminders due at the same instant, two
  worker processes each running the real AutomationService on its own Store (its own connection and
  owner) against the same database; the rate is N over the time from the first run claimed to the last
  one delivered (its outbox row written), and every reminder must be delivered exactly once.

    .venv/bin/python bench/scale.py [--turns 200] [--reminders 500]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.automations.scheduler import AutomationService
from store.db import Store
from store.outbox import Outbox
from store.records import Origin, Outbound, parse_iso, utcnow
from tests.support.postgres import PgCluster, pg_bin
from toolsets.schedule import Once, Reminder

TZ = ZoneInfo("UTC")
CHAT = Origin(surface="telegram", chat_id="100")
LEAD_S = 8.0  # the reminders fall due this long after they are created: both workers are up by then


async def worker(url: str, count: int) -> None:
    """One resident's scheduler: fire what it can claim until every reminder has been delivered."""
    async with Store("unused.db", url=url) as store:
        outbox = Outbox(store)

        async def enqueue(outbound: Outbound, key: str) -> int:
            return await outbox.enqueue(outbound, key)

        service = AutomationService(store, TZ, enqueue)
        await service.start()
        while await store.run(lambda db: db.execute(
                "SELECT count(*) FROM automation_runs WHERE status = 'delivered'").fetchone()[0]) < count:
            await asyncio.sleep(0.2)
        await service.shutdown()


async def reminders(cluster: PgCluster, count: int) -> dict[str, float]:
    url = cluster.url(cluster.database())
    async with Store("unused.db", url=url) as store:
        service = AutomationService(store, TZ, Outbox(store).enqueue)
        at = utcnow() + timedelta(seconds=LEAD_S)
        for i in range(count):  # rows only: this service is never started, it just writes them
            await service.create("telegram:1", CHAT, f"r{i}", Once(type="once", at=at),
                                 Reminder(kind="reminder", text=f"reminder {i}"))
        workers = [await asyncio.create_subprocess_exec(sys.executable, __file__, "--worker", url, str(count))
                   for _ in range(2)]
        codes = await asyncio.gather(*(w.wait() for w in workers))
        assert codes == [0, 0], codes
        runs = await store.run(lambda db: db.execute_returning_dicts(
            "SELECT owner, started_at, finished_at FROM automation_runs WHERE status = 'delivered'"))
        sent = await store.run(
            lambda db: db.execute("SELECT count(*), count(DISTINCT dedupe_key) FROM outbox").fetchone())
    assert len(runs) == count and tuple(sent) == (count, count), (len(runs), sent)
    first = min(parse_iso(r["started_at"]) for r in runs)
    last = max(parse_iso(r["finished_at"]) for r in runs)
    per_owner = sorted(sum(1 for r in runs if r["owner"] == o) for o in {r["owner"] for r in runs})
    return {"rate": count / (last - first).total_seconds(), "span_s": (last - first).total_seconds(),
            "split": per_owner}  # type: ignore[dict-item]


async def main(turns: int, count: int) -> None:
    import turn_overhead  # bench/ is on the path: this file's folder

    bindir = pg_bin()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found (apt-get install postgresql)")
    cluster = PgCluster(bindir).start()
    try:
        started = time.perf_counter()
        sqlite = await turn_overhead.main(turns, False)
        pg = await turn_overhead.main(turns, False, cluster.url(cluster.database()))
        for name, figures in (("sqlite", sqlite), ("postgresql", pg)):
            print(f"{name}: " + " ".join(f"{k}={v:.2f}ms" for k, v in figures.items()))
        fired = await reminders(cluster, count)
        print(f"reminders: {count} due at once, two processes: {fired['rate']:.0f}/s over {fired['span_s']:.2f} s, "
              f"split {fired['split']}, each delivered once")
        print(f"bench wall time {time.perf_counter() - started:.0f} s")
    finally:
        cluster.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--reminders", type=int, default=500)
    ap.add_argument("--worker", nargs=2, metavar=("URL", "COUNT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        asyncio.run(worker(args.worker[0], int(args.worker[1])))
    else:
        asyncio.run(main(args.turns, args.reminders))
