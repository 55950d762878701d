"""Gateway overhead per turn: everything a turn costs except the model's own latency.

Drives N console turns through the real Gateway (store, selection, history, outbox, console delivery)
against the local fake model (zero think time), which runs in its own process so its CPU is not counted.
Messages and replies have typical chat lengths (~80 and ~400 characters), so after a few hundred turns
the session's context is full (the 48,000-character default budget) and every turn pays for a full
window, as a months-long Telegram DM does. The model client is wrapped to time each request, and the
overhead of a turn is its wall time minus the time spent inside model calls, measured twice: until the
reply is handed to the surface (what the person waits for) and until everything the turn caused has
settled (the inbound marked done, the delivery recorded). A quarter of the turns call
a tool (task_create then a reply), the rest are plain replies. Replies are not streamed unless `--stream`
is given (then the console prints each reply as it arrives, through the live-reply path).

    .venv/bin/python bench/turn_overhead.py [--turns 400] [--stream] [--store-url postgresql://...] [--by-length]

`--by-length` also prints the overhead's p50 by the session's length: turns 1-20 (cold), then each hundred
warm turns (21-120, 121-220, ...): a turn's gateway work should not grow with the conversation's length.
`--short` makes the messages short (a chat's: the window then holds many more of them).

bench/scale.py runs it on SQLite and on a private PostgreSQL cluster in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.llm import make_client
from gateway.surfaces.console import ConsoleSurface

ROOT = Path(__file__).resolve().parent.parent


class TimedModel:
    """Wraps a model client and adds up the time spent waiting on it."""

    def __init__(self, inner):  # type: ignore[no-untyped-def]
        self.inner = inner
        self.spent = 0.0

    async def complete(self, messages, tools, on_text=None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return await self.inner.complete(messages, tools, on_text)
        finally:
            self.spent += time.perf_counter() - t0

    async def aclose(self) -> None:
        await self.inner.aclose()


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


async def main(turns: int, stream: bool, store_url: str | None = None, by_length: bool = False,
               short: bool = False) -> dict[str, float]:
    answer = ["--answer-chars", "20"] if short else []
    fake = await asyncio.create_subprocess_exec(sys.executable, str(ROOT / "bench" / "fake_model_server.py"),
                                                *answer, stdout=asyncio.subprocess.PIPE)
    assert fake.stdout is not None
    url = (await fake.stdout.readline()).decode().strip()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = parse_config({"model": {"base_url": url, "model": "bench"}, "runtime": {"stream": stream},
                            "store": {"path": f"{tmp}/anyy.db", **({"url": store_url} if store_url else {})}},
                           "bench")
        model = TimedModel(make_client(cfg.model, "k"))
        console = ConsoleSurface(out=io.StringIO())
        delivered: list[float] = []
        deliver = console.deliver

        async def timed_deliver(item, edit_id):  # type: ignore[no-untyped-def]
            delivered.append(time.perf_counter())
            return await deliver(item, edit_id)

        console.deliver = timed_deliver  # type: ignore[method-assign]
        gw = Gateway(cfg, surfaces=[console], model=model)
        await gw.start()
        overhead, visible, totals, tool_turns, every = [], [], [], [], []
        for i in range(turns + 20):
            spent0 = model.spent
            delivered.clear()
            t0 = time.perf_counter()
            await console.send_line(f"add a task number {i}" if i % 4 == 0 else f"message {i}" if short else
                                    f"message {i}: could you tell me a bit more about the plan for the weekend?")
            await gw.idle()
            wall = time.perf_counter() - t0
            every.append((wall - (model.spent - spent0)) * 1000)
            if i >= 20:  # warm-up turns excluded
                model_s = model.spent - spent0
                totals.append(wall * 1000)
                overhead.append((wall - model_s) * 1000)
                visible.append((delivered[0] - t0 - model_s) * 1000)
                if i % 4 == 0:  # the journal's cost shows here: one insert per effectful call
                    tool_turns.append(overhead[-1])
        await gw.stop()
    fake.terminate()
    await fake.wait()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    backend = "postgresql" if store_url else "sqlite"
    print(f"turns={turns} (1 in 4 with a tool call), streamed={stream}, store={backend}")
    print(f"gateway overhead until the reply is on screen: p50={statistics.median(visible):.2f} ms "
          f"p99={pct(visible, 99):.2f} ms")
    print(f"gateway overhead until everything settled: p50={statistics.median(overhead):.2f} ms "
          f"p99={pct(overhead, 99):.2f} ms")
    print(f"of which tool turns, until everything settled: p50={statistics.median(tool_turns):.2f} ms")
    print(f"turn wall time incl. local model HTTP: p50={statistics.median(totals):.2f} ms p99={pct(totals, 99):.2f} ms")
    print(f"peak RSS: {rss_mb:.0f} MB")
    if by_length:  # the first 20 turns are cold (imports, first reads); then blocks of 100 warm turns
        n = len(every)
        blocks = [(1, 20), *((a, min(a + 99, n)) for a in range(21, n - 49, 100))]
        p50 = {b: statistics.median(every[b[0] - 1:b[1]]) for b in blocks}
        print("overhead until settled by the session's length (p50): " +
              ", ".join(f"turns {a}-{b} {v:.2f} ms" for (a, b), v in p50.items()))
        print(f"turns {blocks[-1][0]}-{n} / turns 21-120: {p50[blocks[-1]] / p50[blocks[1]]:.2f}x")
    return {"visible_p50": statistics.median(visible), "visible_p99": pct(visible, 99),
            "settled_p50": statistics.median(overhead), "settled_p99": pct(overhead, 99),
            "tool_p50": statistics.median(tool_turns)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--stream", action="store_true", help="stream replies (the default config does)")
    ap.add_argument("--store-url", help="a PostgreSQL database instead of the SQLite file")
    ap.add_argument("--by-length", action="store_true", help="p50 by the session's length, per 100 turns")
    ap.add_argument("--short", action="store_true", help="short messages and answers (~15 and ~50 characters): "
                    "the window holds many more of them")
    args = ap.parse_args()
    asyncio.run(main(args.turns, args.stream, args.store_url, args.by_length, args.short))
