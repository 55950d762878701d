"""Telegram load: how fast one `anyy run` drains a backlog, and what each message costs it.

One real `anyy run` process polls the fake Telegram Bot API (tests/fixtures/telegram.py, served from this
process) and asks the fake model (bench/fake_model_server.py, its own process) which answers after
`--delay` seconds (300 ms by default). Before the process starts, `--chats` private chats have each
queued `--messages` messages, interleaved as they would arrive after an outage. Measured:

* every message answered exactly once and, per chat, in order (the reply quotes the message);
* drain time: from the process's first getUpdates to its last reply, and messages per second;
* the process's CPU per message (utime + stime from /proc/<pid>/stat over the drain), and how much of it
  the event loop's thread used (the rest is the store's thread and the resolver's);
* the Bot API calls it made besides the replies (sendChatAction, editMessageText: a streamed reply sent
  before it was complete), the shortest time between two replies into one chat and the most messages
  (sends and edits) that arrived within one second.

`--limits` sets the `[telegram.limits]` section: "raised" lifts Telegram's flood limits far above what the
gateway can send (so the drain measures the gateway), "telegram" keeps Telegram's own (30/s per bot,
1/s per chat, 20/min per group: the drain is then bound by them), "none" writes no section (a tree
without one). `--tree` runs another checkout's gateway (a before/after pair). `--profile` runs the
process under py-spy (`--py-spy` names the binary, e.g. from a throwaway venv) and prints where its
samples fall.

    .venv/bin/python bench/telegram_load.py [--chats 100] [--messages 5] [--delay 0.3]
        [--limits raised|telegram|none] [--tree /path/to/checkout] [--profile out.txt --py-spy /tmp/v/bin/py-spy]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import html
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.telegram import FakeTelegram
from tests.support.telegram_api import Call, FakeBot

ROOT = Path(__file__).resolve().parent.parent
FIRST_USER = 200_000
LIMITS = {
    "raised": "[telegram.limits]\nper_bot_per_s = 100000\nper_chat_per_s = 100000\nper_group_per_min = 100000\n",
    "telegram": "[telegram.limits]\nper_bot_per_s = 30\nper_chat_per_s = 1\nper_group_per_min = 20\n",
    "none": "",
}
# Where a py-spy sample belongs: the first part whose marks a frame of its stack contains, in this order.
# Store operations run on the store's worker thread, so they are told apart by the operation's name.
PARTS = [
    ("start-up and shutdown (imports, migrations)", ("importlib", "Gateway.start", "Gateway.stop", "migrations.py",
                                                     "Store._connect")),
    ("typing indicator", ("_keep_typing",)),
    ("intake (getUpdates, handler, inbound row)", ("_update_fetcher", "Updater.", "_on_message", "InboundLog.accept",
                                                   "HandoffQueue", "process_update")),
    ("message insert + search trigger", ("Messages.add",)),
    ("delivery (outbox rows, sendMessage)", ("OutboxService._dispatch", "OutboxService._deliver", "Outbox.mark_",
                                             "Outbox.due", "Sender.", "deliver_batch", "_deliver_chat")),
    ("the model's HTTP call (gateway/llm)", ("HttpModelClient.",)),
    ("the turn (history, other store work)", ("Runtime.", "LiveReply", "Store.run")),
]
_IDLE_LEAVES = ("_worker (concurrent/futures/thread.py", "EpollSelector.select", "Condition.wait", "Event.wait")
_QUOTE = re.compile(r"About 'chat (\d+) message (\d+)'")


def cpu_s(pid: int, task: int | None = None) -> float:
    """CPU time (user + system) the process (or one of its threads) has used so far, in seconds."""
    where = f"/proc/{pid}/task/{task}/stat" if task is not None else f"/proc/{pid}/stat"
    fields = Path(where).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def config(tmp: Path, bot: FakeBot, model_url: str, chats: int, limits: str) -> Path:
    users = ", ".join(str(FIRST_USER + c) for c in range(chats))
    path = tmp / "config.toml"
    path.write_text(f"""[model]
base_url = "{model_url}"
model = "bench"

[telegram]
base_url = "{bot.base_url}"
base_file_url = "{bot.base_file_url}"
allowed_users = [{users}]
poll_timeout_s = 10

{LIMITS[limits]}""")
    return path


def check(bot: FakeBot, chats: int, messages: int) -> None:
    """Every message answered once, in order within its chat (the replies as the chats finally show
    them: a streamed reply sent early and edited counts once, with its last text); raises AssertionError."""
    per_chat: dict[int, list[int]] = collections.defaultdict(list)
    with bot.lock:
        shown = sorted((m["message_id"], c, m.get("text", "")) for (c, _), m in bot.messages.items()
                       if m["from"]["id"] == bot.id)
    for _, chat_id, text in shown:
        found = _QUOTE.search(html.unescape(text))
        assert found, f"a reply that quotes no message: {text[:80]!r}"
        chat, index = int(found[1]), int(found[2])
        assert chat_id == FIRST_USER + chat, "a reply in the wrong chat"
        per_chat[chat].append(index)
    wrong = {c: got for c in range(chats) if (got := per_chat.get(c)) != list(range(messages))}
    assert not wrong, f"chats not answered exactly once in order: {dict(list(wrong.items())[:5])}"


def peak_per_s(calls: list[Call]) -> int:
    """The most calls that arrived within any one second (what the per-bot limit bounds)."""
    at = sorted(c.at for c in calls)
    start, peak = 0, 0
    for end, t in enumerate(at):
        while t - at[start] >= 1.0:
            start += 1
        peak = max(peak, end - start + 1)
    return peak


def min_gap_s(replies: list[Call]) -> float:
    """The shortest time between two replies to the same chat (what the per-chat limit bounds)."""
    last: dict[str, float] = {}
    gap = float("inf")
    for call in replies:
        chat = str(call.params["chat_id"])
        if chat in last:
            gap = min(gap, call.at - last[chat])
        last[chat] = call.at
    return gap


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tree = Path(args.tree or ROOT).resolve()
    server = FakeTelegram().start()
    fake = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_model_server.py"), "--delay", str(args.delay)],
                            stdout=subprocess.PIPE, text=True)
    assert fake.stdout is not None
    model_url = fake.stdout.readline().strip()
    total = args.chats * args.messages
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            bot = server.new_bot()
            for m in range(args.messages):  # the backlog, interleaved across chats as it piled up
                for c in range(args.chats):
                    bot.message(f"chat {c} message {m}", user_id=FIRST_USER + c, user_name=f"user{c}")
            env = {**os.environ, "PYTHONPATH": str(tree), "ANYY_HOME": str(tmp / "home"),
                   "TELEGRAM_BOT_TOKEN": bot.token, "OPENAI_API_KEY": "k"}
            command = [sys.executable, "-m", "gateway.cli", "run", "--config",
                       str(config(tmp, bot, model_url, args.chats, args.limits))]
            if args.profile:
                command = [args.py_spy, "record", "--format", "raw", "--rate", "250", "--output",
                           str(tmp / "profile.txt"), "--", *command]
            log = (tmp / "stderr.txt").open("w")
            process = subprocess.Popen(command, cwd=tree, env=env, stderr=log)
            try:
                await bot.wait(lambda: bot.sent("getUpdates", ok=False) or process.poll() is not None, 60,
                               "the first getUpdates")
                assert process.poll() is None, (tmp / "stderr.txt").read_text()[-3000:]
                started = time.monotonic()
                pid = gateway_pid(process.pid) if args.profile else process.pid
                cpu0, loop0 = cpu_s(pid), cpu_s(pid, pid)  # the event loop runs on the main thread
                replies = await bot.wait_calls("sendMessage", total, timeout=max(120.0, total / 2))
                cpu1, loop1 = cpu_s(pid), cpu_s(pid, pid)
                await asyncio.sleep(1.0)  # anything sent twice would show now
            finally:
                process.send_signal(signal.SIGINT if args.profile else signal.SIGTERM)
                process.wait(timeout=60)
                log.close()
            err = (tmp / "stderr.txt").read_text()
            replies = bot.sent("sendMessage")
            assert len(replies) == total, f"{len(replies)} replies for {total} messages"
            check(bot, args.chats, args.messages)
            drain_s = max(c.at for c in replies + bot.sent("editMessageText")) - started  # the last final text
            result = {"limits": args.limits, "messages": total, "drain_s": drain_s, "per_s": total / drain_s,
                      "cpu_ms_per_message": (cpu1 - cpu0) * 1000 / total,
                      "loop_ms_per_message": (loop1 - loop0) * 1000 / total, "typing": len(bot.sent("sendChatAction")),
                      "edits": len(bot.sent("editMessageText")),
                      "min_gap_s": min_gap_s(replies),
                      "peak_per_s": peak_per_s(bot.sent("sendMessage") + bot.sent("editMessageText")),
                      "first_reply_s": replies[0].at - started,
                      "errors": err.count("ERROR")}
            if args.profile:
                raw = (tmp / "profile.txt").read_text()
                Path(args.profile).write_text(raw)
                result["profile"] = profile_parts(raw)
            return result
    finally:
        fake.terminate()
        fake.wait()
        server.stop()


def profile_parts(raw: str) -> dict[str, float]:
    """Share of the busy samples per part (py-spy's raw output: one "frame;frame;... count" line per stack)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, number = line.rpartition(" ")
        frames = stack.split(";")
        if not frames or frames[-1].startswith(_IDLE_LEAVES):
            continue
        part = next((name for name, marks in PARTS if any(m in f for f in frames for m in marks)), "event loop, other")
        counts[part] += int(number)
    busy = sum(counts.values()) or 1
    return {part: n * 100 / busy for part, n in counts.most_common()}


def gateway_pid(spy_pid: int) -> int:
    """Under py-spy the gateway is py-spy's child."""
    children = Path(f"/proc/{spy_pid}/task/{spy_pid}/children").read_text().split()
    return int(children[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--messages", type=int, default=5, help="per chat")
    ap.add_argument("--delay", type=float, default=0.3, help="the model's latency, seconds")
    ap.add_argument("--limits", choices=sorted(LIMITS), default="raised")
    ap.add_argument("--tree", help="the checkout whose gateway runs (default: this one)")
    ap.add_argument("--profile", help="write py-spy's raw samples (collapsed stacks) to this file")
    ap.add_argument("--py-spy", default="py-spy", help="the py-spy binary")
    args = ap.parse_args()
    r = asyncio.run(run(args))
    print(f"limits={r['limits']} messages={r['messages']} drain={r['drain_s']:.2f}s rate={r['per_s']:.1f}/s "
          f"cpu={r['cpu_ms_per_message']:.2f} ms/message (event loop {r['loop_ms_per_message']:.2f}) "
          f"typing_actions={r['typing']} edits={r['edits']} "
          f"first_reply={r['first_reply_s']:.2f}s min_gap_same_chat={r['min_gap_s']:.3f}s "
          f"peak_messages_in_1s={r['peak_per_s']} "
          f"error_lines={r['errors']} load={os.getloadavg()[0]:.2f}")
    for part, share in r.get("profile", {}).items():
        print(f"  {share:5.1f} %  {part}")


if __name__ == "__main__":
    main()
