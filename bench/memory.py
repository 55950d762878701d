"""Memory of one gateway process: peak RSS over console turns, and a soak that shows RSS levels off.

Three measurements, each in a fresh process (peak RSS is a process's lifetime maximum), against the
local fake model (bench/fake_model_server.py, its own process):

- `default`: 150 turns (1 in 4 with a tool call, as bench/turn_overhead.py) with the default config;
- `all`: the same with every toolset configured (email, calendar, web search, browser, images, speech,
  an MCP server: `mcp-server-time`), for the record — their connectors are built but never reached;
- `soak`: 20 chats sending in round robin as fast as the fake model answers (20 turns in flight),
  several thousand messages, RSS printed every few hundred; with `--trace`, the allocations that grew
  between the first print and the last (tracemalloc, by line).

Each line also says what was resident before the gateway was imported (the interpreter), after its
imports, and after start-up, so imports and data can be told apart. The store is one that an earlier
process created and migrated, as every start after the first finds it; with `--new-store` the measured
process creates it (and loads sqlite-utils to migrate it).

    .venv/bin/python bench/memory.py [--turns 150] [--soak 4000] [--trace] [--new-store]

The fake model needs the test dependencies (pytest, aiohttp); to measure the gateway in a venv with
Anyy's runtime dependencies only, give the fake model another interpreter:

    /tmp/venv-user/bin/python bench/memory.py --model-python .venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHATS = 20


def rss_mb() -> float:
    """Resident set size now, in MB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def config(model_url: str, store: str, every_toolset: bool) -> dict[str, Any]:
    cfg: dict[str, Any] = {"model": {"base_url": model_url, "model": "bench"}, "store": {"path": f"{store}/anyy.db"}}
    if every_toolset:
        cfg |= {
            "email": {"imap_host": "127.0.0.1", "smtp_host": "127.0.0.1", "username": "me",
                      "from_address": "me@x.test"},
            "calendar": {"url": "http://127.0.0.1:9/dav/"},
            "web": {"search": "searxng"},
            "browser": {"enabled": True},
            "images": {"url": "http://127.0.0.1:9/v1"},
            "speech": {"transcribe_url": "http://127.0.0.1:9/v1"},
            "mcp": {"servers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}},
        }
    return cfg


def message(i: int) -> str:
    return f"add a task number {i}" if i % 4 == 0 else \
        f"message {i}: could you tell me a bit more about the plan for the weekend?"


async def run(scenario: str, turns: int, trace: bool, store: str, model_python: str) -> dict[str, Any]:
    interpreter = rss_mb()
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.surfaces.console import ConsoleSurface
    from store.records import Inbound

    imported = rss_mb()
    fake = await asyncio.create_subprocess_exec(model_python, str(ROOT / "bench" / "fake_model_server.py"),
                                                stdout=asyncio.subprocess.PIPE)
    assert fake.stdout is not None
    url = (await fake.stdout.readline()).decode().strip()
    out: dict[str, Any] = {"scenario": scenario, "interpreter_mb": interpreter, "imports_mb": imported}
    with tempfile.TemporaryDirectory() as tmp:
        import io

        console = ConsoleSurface(out=io.StringIO())
        gw = Gateway(parse_config(config(url, store or tmp, scenario == "all"), "bench"), surfaces=[console])
        await gw.start()
        out["started_mb"] = rss_mb()
        if scenario == "soak":
            out["soak"] = await soak(gw, Inbound, console.user_id, turns, trace)
        else:
            for i in range(turns):
                await console.send_line(message(i))
                await gw.idle()
        out["end_mb"] = rss_mb()
        await gw.stop()
    fake.terminate()
    await fake.wait()
    out["peak_mb"] = peak_mb()
    return out


async def soak(gw: Any, inbound: Any, user_id: str, messages: int, trace: bool) -> dict[str, Any]:
    """`messages` messages from CHATS chats in round robin, one turn per chat in flight."""
    import tracemalloc

    points: list[tuple[int, float]] = []
    first = None
    for sent in range(0, messages, CHATS):
        for chat in range(CHATS):
            await gw.receive(inbound(surface="console", chat_id=f"chat-{chat}", user_id=user_id,
                                     text=message(sent + chat)))
        await gw.idle()
        if (sent + CHATS) % 400 == 0:
            points.append((sent + CHATS, rss_mb()))
            print(f"  {sent + CHATS:5d} messages: RSS {points[-1][1]:.1f} MB", file=sys.stderr, flush=True)
            if trace and first is None and sent + CHATS >= 800:
                tracemalloc.start(1)
                first = tracemalloc.take_snapshot()
    grown: list[str] = []
    if first is not None:
        stats = tracemalloc.take_snapshot().compare_to(first, "lineno")
        grown = [str(s) for s in stats[:12]]
        tracemalloc.stop()
    return {"points": points, "grown": grown}


def migrated(directory: str) -> None:
    """Create and migrate the store in `directory` in another process, as an earlier start would have."""
    code = ("import asyncio, sys; from store.db import Store\n"
            "async def main():\n    async with Store(sys.argv[1] + '/anyy.db'): pass\n"
            "asyncio.run(main())")
    subprocess.run([sys.executable, "-c", code, directory], cwd=ROOT, check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=150)
    ap.add_argument("--soak", type=int, default=4000, help="messages in the soak (0: no soak)")
    ap.add_argument("--trace", action="store_true", help="tracemalloc: what grew during the soak")
    ap.add_argument("--new-store", action="store_true", help="the measured process creates the store")
    ap.add_argument("--model-python", default=sys.executable, help="interpreter of the fake model server")
    ap.add_argument("--scenario", help=argparse.SUPPRESS)  # one measurement, in this process
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)  # its directory ("": a new one)
    args = ap.parse_args()
    if args.scenario:
        n = args.soak if args.scenario == "soak" else args.turns
        print(json.dumps(asyncio.run(run(args.scenario, n, args.trace, args.store, args.model_python))))
        return
    scenarios = ["default", "all"] + (["soak"] if args.soak else [])
    for scenario in scenarios:
        with tempfile.TemporaryDirectory() as store:
            if not args.new_store:
                migrated(store)
            cmd = [sys.executable, __file__, "--scenario", scenario, "--turns", str(args.turns), "--soak",
                   str(args.soak), "--store", "" if args.new_store else store, "--model-python", args.model_python]
            done = subprocess.run(cmd + (["--trace"] if args.trace else []), capture_output=False,
                                  stdout=subprocess.PIPE, text=True, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        what = f"{args.soak} messages, {CHATS} chats" if scenario == "soak" else f"{args.turns} turns"
        print(f"{scenario} ({what}): peak RSS {r['peak_mb']:.1f} MB; interpreter {r['interpreter_mb']:.1f} MB, "
              f"after imports {r['imports_mb']:.1f} MB, after start {r['started_mb']:.1f} MB, "
              f"at the end {r['end_mb']:.1f} MB")
        if scenario == "soak":
            print("  RSS by messages: " + ", ".join(f"{n}: {mb:.1f}" for n, mb in r["soak"]["points"]))
            for line in r["soak"]["grown"]:
                print(f"  grew: {line}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
