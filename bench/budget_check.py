"""Budget check benchmark: what `[budget]` adds before every turn.

A temporary SQLite store holding `--messages` message rows, one every `--every-min` minutes back from now,
every other one a model reply carrying usage (as the runtime stores them); `Budget.check` with a daily and
a monthly cap (two sums over the usage rows, and the allowance look-up) is timed `--runs` times.

    .venv/bin/python bench/budget_check.py [--messages 100000] [--every-min 2] [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import parse_config
from gateway.services.budget import Budget
from store.records import Outbound

USAGE = json.dumps({"usage": {"input_tokens": 100, "output_tokens": 20, "cached_tokens": 0}, "model": "m"})


def fill(db: Any, count: int, every: timedelta) -> None:
    now = datetime.now(UTC)
    db.execute("INSERT INTO sessions (id, surface, chat_id, user_key, kind, epoch, created_at, updated_at)"
               " VALUES ('s', 'telegram', '1', 'telegram:1', 'chat', 0, ?, ?)", [now.isoformat()] * 2)
    db.conn.executemany(
        "INSERT INTO messages (session_id, epoch, turn_id, role, content, user_key, meta, created_at)"
        " VALUES ('s', 0, ?, ?, 'hello', 'telegram:1', ?, ?)",
        [(f"t{i}", "assistant" if i % 2 else "user", USAGE if i % 2 else None, (now - every * i).isoformat())
         for i in range(count)])


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config({"store": {"path": f"{tmp}/anyy.db"}, "budget": {"daily": 1e12, "monthly": 1e12}})
        async with config.new_store() as store:
            await store.write(lambda db: fill(db, args.messages, timedelta(minutes=args.every_min)))

            async def enqueue(outbound: Outbound, key: str) -> int:
                return 0

            budget = Budget(store, config, enqueue)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                await budget.check("telegram:1", guest=False)
                times.append(time.perf_counter() - start)
    this_month = min(args.messages, int(datetime.now(config.tz).day * 24 * 60 / args.every_min))
    print(f"{args.messages:,} messages (about {this_month:,} this month): check p50 "
          f"{statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms over {args.runs} runs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--every-min", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args()))
