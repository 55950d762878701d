"""How long `anyy setup` itself takes, without the person: the whole wizard (model with its live test call,
Telegram with getMe and the owner's /start, Slack with auth.test and the app token, the time zone, then
`anyy doctor`) as one `anyy setup --yes …` process from an empty HOME, against the test suite's fakes
(model, Telegram, Slack) on 127.0.0.1. The owner's /start is sent the moment the wizard starts waiting for
it, so nothing of a human's typing or reading is in the figure; the fake model answers at once, so the
"one test call" is its round trip only.

    .venv/bin/python bench/setup.py [--runs 5]

Prints the median and the slowest run of the whole process, and of `anyy --version` (the interpreter and
the parser, for scale: what any `anyy` command costs before it does anything).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.model import start_fake_model, tool_call
from tests.fixtures.slack import FakeSlack
from tests.fixtures.telegram import FakeTelegram
from tests.support.slack_events import APP_TOKEN, BOT_TOKEN

ANYY = [sys.executable, "-m", "gateway.cli"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one_setup(model, telegram, slack) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole `anyy setup --yes` process."""
    bot = telegram.new_bot()
    model.script(tool_call("setup_check", {"ok": True}))
    with tempfile.TemporaryDirectory() as home:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANYY_")}, "HOME": home,
               "ANYY_HOME": f"{home}/data", "MODEL_KEY": "sk-bench", "BOT": bot.token, "SB": BOT_TOKEN,
               "SA": APP_TOKEN}
        argv = [*ANYY, "setup", "--yes", "--model-provider", "custom", "--model-url", model.url_openai, "--model",
                "fake-1", "--model-key-env", "MODEL_KEY", "--telegram-token-env", "BOT", "--telegram-api",
                bot.base_url, "--slack-bot-token-env", "SB", "--slack-app-token-env", "SA", "--slack-owner",
                "U0123ABCD", "--slack-api", slack.base_url, "--timezone", "Europe/Berlin"]
        started, cpu = time.perf_counter(), children_cpu()
        proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        await bot.wait_calls("getUpdates", timeout=60)  # the wizard waits for /start: the owner sends it at once
        bot.message("/start")
        out, err = await proc.communicate()
        elapsed = time.perf_counter() - started, children_cpu() - cpu
    if proc.returncode != 0 or b"All good." not in out:
        raise SystemExit(f"setup failed ({proc.returncode}):\n{out.decode()}\n{err.decode()}")
    return elapsed


async def version() -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*ANYY, "--version", stdout=asyncio.subprocess.DEVNULL)
    await proc.wait()
    return time.perf_counter() - started


async def main(runs: int) -> None:
    model = start_fake_model()
    telegram = FakeTelegram().start()
    slack = FakeSlack()
    slack.start()
    try:
        await one_setup(model, telegram, slack)  # warm-up: the file cache, not counted
        setups = [await one_setup(model, telegram, slack) for _ in range(runs)]
        versions = [await version() for _ in range(runs)]
    finally:
        model.stop()
        telegram.stop()
        slack.stop()
    walls, cpus = [w for w, _ in setups], [c for _, c in setups]
    print(f"anyy setup --yes (model, telegram, slack, zone, doctor), {runs} runs: wall median "
          f"{statistics.median(walls):.2f} s, slowest {max(walls):.2f} s; CPU median {statistics.median(cpus):.2f} s")
    print(f"anyy --version, {runs} runs: median {statistics.median(versions):.2f} s")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
