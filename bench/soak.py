"""Soak: one `anyy run` under steady Telegram traffic for a long time — does it wear down?

One real `anyy run` process polls the fake Telegram Bot API (tests/fixtures/telegram.py, served from this
process) and asks the fake model (bench/fake_model_server.py, its own process) which answers after
`--delay` seconds. `--chats` private chats send `--rate` messages per second between them (round robin,
evenly spaced, each chat at rate/chats per second whether or not it was answered yet, as people do) for
`--duration` seconds; each conversation grows by a turn per message, so a long run shows what a session's
length costs. Printed per `--window` (messages grouped by when they were sent):

* the reply latency (message sent to the first reply that quotes it whole: a sendMessage, or the edit of a
  streamed one) p50 and p99;
* the process's RSS at the window's end, and the slope of RSS against messages answered after the first
  1,000 (MB per 1,000 messages): memory that settles has a slope near 0;
* the process's CPU seconds per message answered in the window (flat when a turn's work does not grow);
* the machine's load average (the machine is shared: a figure means little without it).

At the end: every message answered exactly once and, per chat, in order (raises otherwise), and how long
the process took to exit on SIGTERM. `--profile-at 1000,9000 --py-spy BIN` records `--profile-s` seconds
of py-spy samples once that many messages were answered (the turn number of a session is that divided by
`--chats`) and prints the functions most samples were in; `--tracemalloc 1000,2000,5000` starts
tracemalloc in the process at the first count (slower from then on: use it for memory only), takes a
snapshot at each count and prints what grew between the second and the last (with two counts: what was
allocated after the first and is still held at the last).

    .venv/bin/python bench/soak.py [--chats 20] [--rate 20] [--duration 1800] [--delay 0.3] [--window 60]
        [--profile-at 1000,9000 --py-spy .venv/bin/py-spy] [--tracemalloc 1000,5000] [--config-extra TOML]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import html
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from telegram_load import _QUOTE, FIRST_USER, config, cpu_s

from tests.fixtures.telegram import FakeTelegram
from tests.support.telegram_api import FakeBot

ROOT = Path(__file__).resolve().parent.parent
KEEP_POLLS = 120  # the fake keeps the messages of the last minute (polled every 0.5 s)
# Run by `--tracemalloc`: the gateway's CLI with SIGUSR2 dumping a numbered snapshot; the first one starts
# tracing (tracing from the start would slow the imports past the bench's patience), so the comparison
# shows what was allocated after it and is still held.
TRACED = ("import itertools, runpy, signal, sys, tracemalloc; n = itertools.count(); d = sys.argv.pop(1)\n"
          "def snap(*_):\n"
          "    tracemalloc.is_tracing() or tracemalloc.start(4)\n"
          "    tracemalloc.take_snapshot().dump(f'{d}/snap-{next(n)}')\n"
          "signal.signal(signal.SIGUSR2, snap); runpy.run_module('gateway.cli', run_name='__main__')")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def slope_per_1000(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of RSS (MB) against messages answered, per 1,000 messages."""
    if len(points) < 2:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs) or 1.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 1000


def misplaced(got: list[int]) -> str:
    """A chat's replies that are not 0, 1, 2...: how many, and where the first out of place is."""
    return f"{len(got)} replies, the first out of place: #{next(i for i, n in enumerate([*got, -1]) if n != i)}"


class Replies:
    """What the bot sent, read incrementally from the fake's call log (the fake's own helpers rescan it
    all, which over hours of traffic would cost this process more than the gateway)."""

    def __init__(self, bot: FakeBot) -> None:
        self.bot = bot
        self.seen = 0
        self.answered: dict[tuple[int, int], float] = {}
        self.order: dict[int, list[int]] = collections.defaultdict(list)
        self.duplicates = 0
        self.marks: collections.deque[int] = collections.deque(maxlen=KEEP_POLLS)  # newest message id per poll

    def poll(self) -> None:
        with self.bot.lock:
            new = self.bot.calls[self.seen:]
            self.seen = len(self.bot.calls)
            self._prune()
        for call in new:  # a streamed reply may be sent cut short, the quote whole only in a later edit
            if call.method not in ("sendMessage", "editMessageText") or not call.ok:
                continue
            found = _QUOTE.search(html.unescape(str(call.params.get("text", ""))))
            if not found:
                continue
            chat, index = int(found[1]), int(found[2])
            assert int(call.params["chat_id"]) == FIRST_USER + chat, "a reply in the wrong chat"
            if (chat, index) in self.answered:
                self.duplicates += call.method == "sendMessage"  # a second message; an edit is the same one
                continue
            self.answered[(chat, index)] = call.at
            self.order[chat].append(index)

    def _prune(self) -> None:
        """Keep the fake's message map small (its sendMessage scans it): forget messages older than a minute
        (a streamed reply is edited within seconds), except each chat's newest."""
        messages = self.bot.messages
        if len(self.marks) == KEEP_POLLS:
            newest: dict[int, int] = {}
            for chat, mid in messages:
                newest[chat] = max(newest.get(chat, 0), mid)
            for key in [k for k in messages if k[1] < self.marks[0] and newest[k[0]] != k[1]]:
                del messages[key]
        self.marks.append(max((mid for _, mid in messages), default=0))


async def profile(spy: str, pid: int, seconds: int, out: Path) -> None:
    proc = await asyncio.create_subprocess_exec(spy, "record", "--pid", str(pid), "--duration", str(seconds),
                                                "--rate", "200", "--nonblocking", "--format", "raw",
                                                "--output", str(out),
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    await proc.wait()


def print_profile(raw: str, top: int = 25) -> None:
    """The functions most busy samples were in (each counted once per stack), as a share of busy samples."""
    counts: collections.Counter[str] = collections.Counter()
    busy = 0
    for line in raw.splitlines():
        stack, _, number = line.rpartition(" ")
        frames = stack.split(";")
        if frames[-1].startswith(("_worker (concurrent", "EpollSelector.select", "Condition.wait", "Event.wait",
                                  "select (selectors", "wait (threading")):
            continue
        busy += int(number)
        names = {f.rsplit(":", 1)[0] + ")" for f in frames if "gateway/" in f or "store/" in f}
        for name in names:
            counts[name] += int(number)
    print(f"  busy samples: {busy}")
    for frame, n in counts.most_common(top):
        print(f"  {n * 100 / (busy or 1):5.1f} %  {frame}")


def print_tracemalloc(first: Path, last: Path) -> None:
    old, new = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(last))
    keep = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    diff = new.filter_traces(keep).compare_to(old.filter_traces(keep), "traceback")
    print(f"  grown between the snapshots: {sum(d.size_diff for d in diff) / 1e6:+.2f} MB traced")
    for d in diff[:12]:
        print(f"  {d.size_diff / 1e6:+7.2f} MB {d.count_diff:+7d} blocks")
        for frame in d.traceback.format()[-8:]:
            print(f"      {frame.strip()}")


async def run(args: argparse.Namespace) -> None:
    server = FakeTelegram().start()
    fake = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_model_server.py"), "--delay", str(args.delay),
                             "--answer-chars", str(args.answer_chars)],
                            stdout=subprocess.PIPE, text=True)
    assert fake.stdout is not None
    model_url = fake.stdout.readline().strip()
    marks_profile = [int(n) for n in args.profile_at.split(",")] if args.profile_at else []
    marks_trace = [int(n) for n in args.tracemalloc.split(",")] if args.tracemalloc else []
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            bot = server.new_bot()
            cfg = config(tmp, bot, model_url, args.chats, "raised")
            cfg.write_text(cfg.read_text() + "\n[dashboard]\nenabled = false\n")  # its port is not ours to take
            if args.config_extra:
                cfg.write_text(cfg.read_text() + "\n" + Path(args.config_extra).read_text())
            env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYY_HOME": str(tmp / "home"),
                   "TELEGRAM_BOT_TOKEN": bot.token, "OPENAI_API_KEY": "k"}
            head = [sys.executable, "-c", TRACED, str(tmp)] if marks_trace else [sys.executable, "-m", "gateway.cli"]
            log = (tmp / "stderr.txt").open("w")
            process = subprocess.Popen([*head, "run", "--config", str(cfg)], cwd=ROOT, env=env, stderr=log)
            try:
                replies = Replies(bot)
                await bot.wait(lambda: bot.sent("getUpdates", ok=False) or process.poll() is not None, 180,
                               "getUpdates")
                assert process.poll() is None, (tmp / "stderr.txt").read_text()[-3000:]
                sent: dict[tuple[int, int], float] = {}
                total = int(args.rate * args.duration)
                start = time.monotonic()

                async def inject() -> None:
                    for i in range(total):
                        delay = start + i / args.rate - time.monotonic()
                        if delay > 0:
                            await asyncio.sleep(delay)
                        chat, index = i % args.chats, i // args.chats
                        sent[(chat, index)] = time.monotonic()
                        bot.message(f"chat {chat} message {index}", user_id=FIRST_USER + chat, user_name=f"user{chat}")

                injecting = asyncio.create_task(inject())
                windows: list[dict[str, float]] = []
                rss_points: list[tuple[int, float]] = []
                spies: list[asyncio.Task[None]] = []
                cpu0, t0, w = cpu_s(process.pid), start, 0
                print(f"soak: chats={args.chats} rate={args.rate}/s duration={args.duration}s delay={args.delay}s "
                      f"window={args.window}s messages={total}", flush=True)
                while True:
                    await asyncio.sleep(0.5)
                    replies.poll()
                    done = len(replies.answered)
                    while marks_profile and done >= marks_profile[0]:
                        mark = marks_profile.pop(0)
                        spies.append(asyncio.create_task(profile(args.py_spy, process.pid, args.profile_s,
                                                                 tmp / f"profile-{mark}.txt")))
                    while marks_trace and done >= marks_trace[0]:
                        marks_trace.pop(0)
                        process.send_signal(signal.SIGUSR2)
                    now = time.monotonic()
                    finished = injecting.done() and done >= total
                    if now - t0 < args.window and not finished:
                        if now - start > args.duration + args.drain_timeout:
                            break
                        continue
                    cpu1 = cpu_s(process.pid)
                    lo, hi = start + w * args.window, start + (w + 1) * args.window
                    lat = [replies.answered[k] - at for k, at in sent.items()
                           if lo <= at < hi and k in replies.answered]
                    answered_now = sum(1 for at in replies.answered.values() if t0 <= at < now)
                    rss = rss_mb(process.pid)
                    if done >= 1000:
                        rss_points.append((done, rss))
                    row = {"p50": pct(lat, 50), "p99": pct(lat, 99), "rss": rss,
                           "cpu_ms": (cpu1 - cpu0) * 1000 / max(answered_now, 1), "n": len(lat)}
                    windows.append(row)
                    print(f"window {w:3d} t={now - start:6.0f}s sent={len(lat):5d} answered={done:6d} "
                          f"p50={row['p50']:.3f}s p99={row['p99']:.3f}s rss={rss:6.1f}MB "
                          f"cpu={row['cpu_ms']:.2f}ms/msg load={os.getloadavg()[0]:.2f}", flush=True)
                    cpu0, t0, w = cpu1, now, w + 1
                    if finished:
                        break
                await asyncio.gather(*spies)
                injecting.cancel()
                stopping = time.monotonic()
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                finally:
                    stop_s = time.monotonic() - stopping
                    log.close()
                err = (tmp / "stderr.txt").read_text()
                replies.poll()
                full = [r for r in windows if r["n"] >= args.rate * args.window * 0.9]
                print(f"answered {len(replies.answered)}/{total}, duplicates={replies.duplicates}, "
                      f"exit on SIGTERM {stop_s:.2f}s, error lines={err.count('ERROR')}")
                if full:
                    first, last = full[0], full[-1]
                    print(f"p99 last/first full window: {last['p99']:.3f}/{first['p99']:.3f} s "
                          f"= {last['p99'] / first['p99']:.2f}x; cpu per message last/first: "
                          f"{last['cpu_ms']:.2f}/{first['cpu_ms']:.2f} ms = {last['cpu_ms'] / first['cpu_ms']:.2f}x")
                print(f"RSS slope after the first 1,000 messages: {slope_per_1000(rss_points):+.2f} MB per 1,000 "
                      f"({len(rss_points)} samples)")
                for raw in sorted(tmp.glob("profile-*.txt"), key=lambda p: int(p.stem.split("-")[1])):
                    if args.log:  # kept beside the log, for a closer look (py-spy's collapsed stacks)
                        Path(f"{args.log}.{raw.name}").write_text(raw.read_text())
                    print(f"py-spy at {raw.stem.split('-')[1]} messages answered:")
                    print_profile(raw.read_text())
                snaps = sorted(tmp.glob("snap-*"), key=lambda p: int(p.name.split("-")[1]))
                if len(snaps) >= 2:  # the first starts tracing: with three or more, compare two traced ones
                    print_tracemalloc(snaps[min(1, len(snaps) - 2)], snaps[-1])
                errors = [line for line in err.splitlines() if "ERROR" in line]
                for line in dict.fromkeys(e.split(" ", 2)[-1][:200] for e in errors[:200]):
                    print(f"  error: {line}")
                if args.log:
                    Path(args.log).write_text(err)
                wrong = {c: misplaced(got) for c in range(args.chats)
                         if (got := replies.order.get(c, [])) != list(range(1 + max(i for (ch, i) in sent if ch == c)))}
                assert not replies.duplicates and not wrong, f"not once in order: {dict(list(wrong.items())[:5])}"
                assert len(replies.answered) == total, f"{len(replies.answered)} answered of {total}"
            finally:
                if process.poll() is None:  # the bench failed before its SIGTERM
                    process.kill()
                    process.wait()
    finally:
        fake.terminate()
        fake.wait()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chats", type=int, default=20)
    ap.add_argument("--rate", type=float, default=20.0, help="messages per second, all chats together")
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of traffic")
    ap.add_argument("--delay", type=float, default=0.3, help="the model's latency, seconds")
    ap.add_argument("--window", type=float, default=60.0, help="seconds per reported window")
    ap.add_argument("--drain-timeout", type=float, default=120.0, help="seconds to wait for the last replies")
    ap.add_argument("--profile-at", help="messages answered at which to record py-spy samples, e.g. 1000,9000")
    ap.add_argument("--profile-s", type=int, default=20)
    ap.add_argument("--py-spy", default=str(ROOT / ".venv" / "bin" / "py-spy"))
    ap.add_argument("--tracemalloc", help="messages answered at which to take snapshots, e.g. 1000,5000")
    ap.add_argument("--config-extra", help="a TOML file appended to the generated config")
    ap.add_argument("--answer-chars", type=int, default=20,
                    help="the model's answers: the quote then this many characters (short chats fill a window "
                         "with many messages)")
    ap.add_argument("--log", help="write the process's stderr to this file")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
