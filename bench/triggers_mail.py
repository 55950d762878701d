"""Email triggers: how soon a message reaches the owner, and what watching costs while nothing arrives.

One real `anyy run` process watches `--folders` folders of the local IMAP server (pymap, as in the tests)
with one email trigger each (a reminder action), and delivers to the fake Telegram Bot API; the fake
model counts the calls it gets. Mail is sent by SMTP (aiosmtpd), which files it into the IMAP server
(tests/support/mail_drop.py). Measured:

* latency: from the IMAP server acknowledging the APPEND of a message to the owner's notice arriving at
  the fake Telegram (`--messages` messages, one at a time, spread over the folders): p50, p90, max;
* idle cost: over `--idle-s` seconds with nothing arriving, the process's CPU seconds (utime + stime
  from /proc/<pid>/stat), its RSS at the end, and the model calls (must be 0).

    .venv/bin/python bench/triggers_mail.py [--folders 5] [--messages 20] [--idle-s 600] [--raised-limits]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trustme
from proxyprotocol.reader import ProxyProtocolReader
from pymap.backend.dict import DictBackend
from pymap.imap import IMAPServer

from tests.fixtures.mail import PASSWORD, USER, ServerLoop
from tests.fixtures.model import start_fake_model
from tests.fixtures.telegram import FakeTelegram
from tests.support.mail_drop import MailDrop
from tests.support.telegram_api import OWNER_ID, FakeBot

ROOT = Path(__file__).resolve().parent.parent


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def start_imap(loop: ServerLoop, cert_file: str, stack: AsyncExitStack) -> int:
    args = Namespace(host="127.0.0.1", port=0, debug=False, cert=cert_file, key=None, tls=True, passlib_cfg=None,
                     proxy_protocol=None, inherited_sockets=None, demo_data=False, demo_user=USER,
                     demo_password=PASSWORD)
    backend, config = await DictBackend.init(args)
    config.apply_context()
    await backend.start(stack)
    return await loop.listen_streams(ProxyProtocolReader(config.proxy_protocol).get_callback(
        IMAPServer(backend.login, config)))


def write_config(tmp: Path, bot: FakeBot, model_url: str, imap_port: int, raised: bool) -> Path:
    # Telegram's own flood limit (1 message a second per chat) spaces notices to one chat; "raised"
    # lifts it, so the figure is the trigger's path alone.
    limits = "[telegram.limits]\nper_bot_per_s = 100000\nper_chat_per_s = 100000\n" if raised else ""
    path = tmp / "config.toml"
    path.write_text(f"""[model]
base_url = "{model_url}"
model = "bench"

[store]
path = "{tmp / 'anyy.db'}"

[dashboard]
enabled = false

[telegram]
base_url = "{bot.base_url}"
base_file_url = "{bot.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10

[email]
imap_host = "127.0.0.1"
imap_port = {imap_port}
imap_security = "none"
smtp_host = "127.0.0.1"
smtp_port = 1
smtp_security = "none"
username = "{USER}"
password_env = "BENCH_MAIL_PASSWORD"
from_address = "{USER}"

{limits}""")
    return path


async def create_triggers(config: Path, folders: list[str]) -> None:
    """The triggers, created as the CLI would (admin mode on the same store) before the resident starts."""
    from gateway.automations.scheduler import AutomationService
    from gateway.config import load_config
    from store.records import Origin
    from toolsets.schedule import Reminder, parse_schedule

    cfg = load_config(str(config))
    store = cfg.new_store()
    await store.open()

    async def no_delivery(*_: Any) -> int:
        raise AssertionError("admin mode delivers nothing")

    service = AutomationService(store, cfg.tz, no_delivery)
    for folder in folders:
        await service.create(f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID)),
                             f"mail in {folder}", parse_schedule({"type": "email", "folder": folder}),
                             Reminder(kind="reminder", text="📧 {subject}"))
    await store.close()


async def wait_log(log: Path, text: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while log.read_text().count(text) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} x{count} not in the log:\n{log.read_text()[-3000:]}")
        await asyncio.sleep(0.05)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    ca = trustme.CA()
    loop, stack = ServerLoop(), AsyncExitStack()
    telegram, model = FakeTelegram().start(), start_fake_model()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cert_file = tmp / "server.pem"
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert_file))
        imap_port = loop.run(start_imap(loop, str(cert_file), stack))
        drop = MailDrop(imap_port, USER, PASSWORD)
        drop.start()
        bot = telegram.new_bot()
        folders = [drop.new_folder("Bench") for _ in range(args.folders)]
        config = write_config(tmp, bot, model.url_openai, imap_port, args.raised_limits)
        await create_triggers(config, folders)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYY_HOME": str(tmp / "home"), "OPENAI_API_KEY": "k",
               "TELEGRAM_BOT_TOKEN": bot.token, "BENCH_MAIL_PASSWORD": PASSWORD}
        log_path = tmp / "stderr.txt"
        log = log_path.open("w")
        process = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run", "--config", str(config)],
                                   cwd=ROOT, env=env, stderr=log)
        try:
            await wait_log(log_path, "mail_watch_baseline", args.folders)
            latencies = []
            for n in range(args.messages):
                message_id = await drop.asend(folders[n % len(folders)], subject=f"bench {n}")
                await bot.wait_calls("sendMessage", n + 1, timeout=30)
                call = bot.sent("sendMessage")[n]
                assert call.params["text"].endswith(f"bench {n}"), call.params["text"]
                latencies.append(call.at - drop.filer.accepted_at[message_id.strip()])
            await asyncio.sleep(2)  # let the last sweep settle before the idle window
            cpu0, started = cpu_s(process.pid), time.monotonic()
            await asyncio.sleep(args.idle_s)
            idle_cpu, idle_wall = cpu_s(process.pid) - cpu0, time.monotonic() - started
            rss = rss_mb(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            log.close()
            drop.stop()
            telegram.stop()
            model.stop()
            loop.run(stack.aclose())
            loop.stop()
        err = log_path.read_text()
    latencies.sort()
    return {"folders": args.folders, "messages": args.messages, "raised_limits": args.raised_limits,
            "latency_p50_ms": statistics.median(latencies) * 1000,
            "latency_p90_ms": latencies[int(len(latencies) * 0.9) - 1] * 1000, "latency_max_ms": latencies[-1] * 1000,
            "notices": len(bot.sent("sendMessage")), "idle_s": round(idle_wall, 1), "idle_cpu_s": round(idle_cpu, 3),
            "rss_mb": round(rss, 1), "model_calls": len(model.requests), "errors": err.count("ERROR"),
            "watch_retries": err.count("mail_watch_retry")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folders", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--idle-s", type=float, default=600.0)
    parser.add_argument("--raised-limits", action="store_true", help="lift Telegram's 1/s per-chat limit")
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
