"""Webhook benchmark: accept latency and how many deliveries a second one resident records.

A real `anyy run` (SQLite store in a temporary directory, the dashboard's listener on 127.0.0.1, no
surface and no model: the automation's action is a reminder) and one webhook automation made in the store
beforehand. Each delivery is a POST with `Authorization: Bearer` and its own `Idempotency-Key`; its answer
(202) comes after the event is recorded and its run claimed. Afterwards the recorded events are counted
in the store, so every 202 is checked to have left a row.

* latency: `--sequential` deliveries one after another; p50 / p95 of request to 202. Goal: p50 <= 20 ms.
* throughput: `--total` deliveries from `--concurrency` clients at once; deliveries recorded per second.
* refusals: the same number of POSTs to an unknown name, and to the real one with a wrong signature;
  p50 of each, to show that the answer (the same 404) does not take measurably longer for either.

    .venv/bin/python bench/webhooks.py [--sequential 300] [--total 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from gateway.config import load_config
from gateway.services.webhooks import WebhookService
from store.records import Origin

KEY = "x5fS2v8mN1oUuJ3pQ9rT0wY7zA4bC6dE8fG1hI2jK3k="
LISTENING = re.compile(rb"dashboard: up on 127\.0\.0\.1:(\d+)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def prepare(directory: Path) -> tuple[Path, str]:
    """The config, and a webhook automation's secret."""
    from gateway.automations.scheduler import AutomationService
    from store.outbox import Outbox
    from toolsets.schedule import parse_action, parse_schedule

    config_path = directory / "config.toml"
    config_path.write_text(f'[store]\npath = "{directory / "anyy.db"}"\n\n[dashboard]\nlisten = "127.0.0.1:0"\n'
                           'webhook_per_minute = 100000\n', encoding="utf-8")  # the bench measures, unthrottled
    config = load_config(str(config_path))
    async with config.new_store() as store:
        service = AutomationService(store, config.tz, Outbox(store).enqueue)
        rec = await service.create("telegram:1", Origin(surface="telegram", chat_id="1"), "bench",
                                   parse_schedule({"type": "webhook", "name": "bench"}),
                                   parse_action({"kind": "reminder", "text": "🔔 {summary}"}))
        secret = await WebhookService(store, config.data_dir, service.fire_event).issue(rec.id)
    return config_path, secret


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        os.environ.update({"ANYY_HOME": str(directory / "home"), "ANYY_SECRET_KEY": KEY})
        config_path, secret = await prepare(directory)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "gateway.cli", "run", "--config",
                                                    str(config_path), stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            assert proc.stderr is not None
            while not (found := LISTENING.search(line := await proc.stderr.readline())):
                if not line:
                    raise SystemExit("anyy run exited before listening")
            drain = asyncio.create_task(proc.stderr.read())  # keep the pipe from filling
            url = f"http://127.0.0.1:{int(found.group(1))}/hooks/bench"
            headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
            body = json.dumps({"status": "failed", "job": "build", "log": "x" * 2000}).encode()
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency)) as client:
                async def deliver(key: str) -> float:
                    start = time.perf_counter()
                    async with client.post(url, data=body, headers={**headers, "Idempotency-Key": key}) as r:
                        assert r.status == 202, r.status
                    return time.perf_counter() - start

                for n in range(20):  # warm-up: connections, caches, the first decrypt
                    await deliver(f"warm-{n}")
                latencies = [await deliver(f"seq-{n}") for n in range(args.sequential)]
                queue = iter(range(args.total))

                async def worker() -> None:
                    for n in queue:
                        await deliver(f"par-{n}")

                start = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(args.concurrency)))
                elapsed = time.perf_counter() - start

                async def refused(target: str, proof: dict[str, str]) -> float:
                    start = time.perf_counter()
                    async with client.post(target, data=body, headers=proof) as r:
                        assert r.status == 404, r.status
                    return time.perf_counter() - start

                wrong = {"X-Hub-Signature-256": "sha256=" + "0" * 64}
                unknown, bad = [], []
                for _ in range(args.sequential):  # interleaved, so load changes hit both alike
                    unknown.append(await refused(url.replace("/bench", "/nope"), wrong))
                    bad.append(await refused(url, wrong))
        finally:
            proc.terminate()
            await proc.wait()
        await drain
        config = load_config(str(config_path))
        async with config.new_store() as store:
            recorded = await store.run(lambda db: db.execute(
                "SELECT count(*) FROM trigger_events WHERE kind = 'webhook'").fetchone()[0])
    expected = 20 + args.sequential + args.total
    p50 = statistics.median(latencies) * 1e3
    print(f"accept latency over {args.sequential} sequential deliveries: p50 {p50:.1f} ms, "
          f"p95 {percentile(latencies, 0.95) * 1e3:.1f} ms")
    print(f"{args.total} deliveries from {args.concurrency} clients: {elapsed:.2f} s, "
          f"{args.total / elapsed:.0f} recorded/s")
    print(f"events recorded: {recorded} of {expected} accepted")
    print(f"404 p50: unknown name {statistics.median(unknown) * 1e3:.2f} ms, "
          f"wrong signature {statistics.median(bad) * 1e3:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--total", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    asyncio.run(main(parser.parse_args()))
