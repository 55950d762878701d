"""Email triggers end to end through `anyy run`: the owner asks for the trigger on the fake Telegram, the
model creates it, mail sent by SMTP lands in the IMAP server and the notice arrives on Telegram; mail that
came while `anyy run` was down fires once after start; a kill -9 between the run's claim and its delivery
still gives exactly one notice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mail import PASSWORD, USER
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.cli import SUBPROCESS_S
from tests.support.mail_drop import MailDrop
from tests.support.resident import Resident, resident, run_config
from tests.support.telegram_api import OWNER_ID, FakeBot


@pytest.fixture(scope="session")
def mail_drop(mail_servers: Any) -> Iterator[MailDrop]:
    drop = MailDrop(mail_servers.imap_port, USER, PASSWORD)
    drop.start()
    yield drop
    drop.stop()


def config(tmp_path: Path, model: FakeModel, tg: FakeBot, mail_servers: Any) -> Path:
    return run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10

[email]
imap_host = "127.0.0.1"
imap_port = {mail_servers.imap_port}
imap_security = "none"
smtp_host = "127.0.0.1"
smtp_port = {mail_servers.smtp_port}
smtp_security = "none"
username = "{USER}"
password_env = "ANYY_TEST_MAIL_PASSWORD"
from_address = "{USER}"
timeout_s = 5""")


SECRETS = {"TELEGRAM_BOT_TOKEN": "", "OPENAI_API_KEY": "test-key", "ANYY_TEST_MAIL_PASSWORD": PASSWORD}


def secrets(tg: FakeBot, **extra: str) -> dict[str, str]:
    return {**SECRETS, "TELEGRAM_BOT_TOKEN": tg.token, **extra}


def notices(tg: FakeBot) -> list[str]:
    """The trigger's lines as the chat shows them."""
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items())
                if c == OWNER_ID and m["from"]["id"] == tg.id and m["text"].startswith("📧")]


async def log_shows(anyy: Resident, text: str, count: int = 1, timeout: float = SUBPROCESS_S) -> None:
    """Wait until the resident's log holds `text` `count` times (its watch is up, it swept, ...)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while anyy.output().count(text) < count:
        if loop.time() > deadline or anyy.process.returncode is not None:
            raise AssertionError(f"{text!r} not in the log:\n{anyy.output()[-3000:]}")
        await asyncio.sleep(0.05)


async def ask_for_trigger(tg: FakeBot, model: FakeModel, folder: str) -> None:
    model.script(tool_call("automation_create", {
        "name": "bank mail", "schedule": {"type": "email", "folder": folder, "from": ["*@bank.example"]},
        "action": {"kind": "reminder"}}), reply("I will tell you when the bank writes."))
    await tg.wait_calls("getUpdates", timeout=SUBPROCESS_S)
    tg.message("create an automation: tell me when the bank writes")
    await tg.wait(lambda: any("when the bank writes" in t for t in _texts(tg)) or None, timeout=SUBPROCESS_S,
                  what="the model's answer")


def _texts(tg: FakeBot) -> list[str]:
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == OWNER_ID and m["from"]["id"] == tg.id]


async def test_mail_wakes_a_trigger_in_anyy_run_and_mail_while_down_fires_after_start(
        tg: FakeBot, model: FakeModel, tmp_path: Path, mail_servers: Any, mail_drop: MailDrop) -> None:
    folder = mail_drop.new_folder()
    path = config(tmp_path, model, tg, mail_servers)
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await ask_for_trigger(tg, model, folder)
        await log_shows(anyy, f"mail_watch_baseline lease=watch:mail:default:{folder}")
        asked = len(model.requests)  # the turn that created the trigger
        await mail_drop.asend(folder, subject="Statement for March")
        await mail_drop.asend(folder, sender="Shop <offers@shop.example>", subject="Offers")  # filtered out
        await tg.wait(lambda: notices(tg) or None, timeout=SUBPROCESS_S, what="the notice")
        await log_shows(anyy, f"mail_watch_message lease=watch:mail:default:{folder}", count=2)
        assert await anyy.terminate() == 0
    assert notices(tg) == ["📧 Ann <ann@bank.example>: Statement for March"]
    assert len(model.requests) == asked  # no mail reached the model
    output = anyy.output()
    assert PASSWORD not in output and "Statement for March" not in output  # no secrets, no mail at info

    await mail_drop.asend(folder, subject="Arrived while down")
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await tg.wait(lambda: len(notices(tg)) == 2 or None, timeout=SUBPROCESS_S, what="the late notice")
        await log_shows(anyy, "mail_watch_message", count=1)
        assert await anyy.terminate() == 0
    assert notices(tg) == ["📧 Ann <ann@bank.example>: Statement for March",
                           "📧 Ann <ann@bank.example>: Arrived while down"]


async def test_kill_9_between_the_claim_and_the_delivery_gives_exactly_one_notice(
        tg: FakeBot, model: FakeModel, tmp_path: Path, mail_servers: Any, mail_drop: MailDrop) -> None:
    folder = mail_drop.new_folder()
    path = config(tmp_path, model, tg, mail_servers)
    async with resident(tmp_path, path, secrets(tg, ANYY_PAUSE_AT="trigger.claimed")) as anyy:
        await ask_for_trigger(tg, model, folder)
        await log_shows(anyy, f"mail_watch_baseline lease=watch:mail:default:{folder}")
        await mail_drop.asend(folder, subject="Statement once")
        await log_shows(anyy, "anyy: paused at trigger.claimed")
        anyy.process.kill()
        await anyy.process.wait()
    assert notices(tg) == []
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await tg.wait(lambda: notices(tg) or None, timeout=SUBPROCESS_S, what="the recovered notice")
        # The sweep after start reads the message again (its watermark had not moved): claimed already.
        await log_shows(anyy, f"mail_watch_message lease=watch:mail:default:{folder}")
        assert await anyy.terminate() == 0
    assert notices(tg) == ["📧 Ann <ann@bank.example>: Statement once"]
