"""Issue 27 end to end: two real `anyy run` processes, each with its own data directory and ports, on
one PostgreSQL database, against the fake Bot API and the fake model (docs/scale.md)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gateway.automations.scheduler import AutomationService
from store.db import Store
from store.outbox import Outbox
from store.records import Origin, utcnow
from tests.fixtures.model import reply, tool_call
from tests.support.cli import SUBPROCESS_S
from tests.support.crash import Child, start
from tests.support.postgres import PgCluster
from tests.support.telegram_api import OWNER_ID, FakeBot
from tests.test_telegram_webhook import raw_post
from toolsets.schedule import Once, Reminder

SECRET = "two-Residents_1"
TAKEOVER_S = 45  # the contract: a killed resident's turn is finished by another within this


def texts(tg: FakeBot) -> list[str]:
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == OWNER_ID and m["from"]["id"] == tg.id]


def write_config(path: Path, model: Any, tg: FakeBot, url: str, telegram: str, extra: str = "") -> str:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text(f"""
[model]
base_url = "{model.url_openai}"
model = "fake-1"
timeout_s = 10
max_retries = 1

[store]
path = "{path / 'anyy.db'}"
url = "{url}"

[dashboard]
enabled = false

[runtime]
stream = false

[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 2
{telegram}

{extra}
""", encoding="utf-8")
    return str(path / "config.toml")


_changed: dict[int, asyncio.Event] = collections.defaultdict(asyncio.Event)


async def drain(child: Child) -> None:
    """Keep reading the child's stderr (a full pipe would stop it), keeping the lines."""
    assert child.process.stderr is not None
    while line := await child.process.stderr.readline():
        child.stderr_lines.append(line.decode(errors="replace"))
        _changed[child.process.pid].set()


async def logged(child: Child, text: str, timeout: float = SUBPROCESS_S) -> None:
    """Wait until the drained stderr of `child` has a line containing `text`."""
    changed = _changed[child.process.pid]

    async def look() -> None:
        while True:
            changed.clear()
            if any(text in line for line in child.stderr_lines):
                return
            await changed.wait()

    await asyncio.wait_for(look(), timeout)


@contextlib.asynccontextmanager
async def residents(tmp_path: Path, model: Any, tg: FakeBot, url: str, sections: list[str],
                    pause_at: list[str | None], extra: str = "") -> AsyncIterator[list[Child]]:
    children: list[Child] = []
    readers: list[asyncio.Task[None]] = []
    try:
        for i, section in enumerate(sections):
            cfg = write_config(tmp_path / f"r{i}", model, tg, url, section, extra)
            env = {**os.environ, "ANYY_HOME": str(tmp_path / f"r{i}" / "home"), "TELEGRAM_BOT_TOKEN": tg.token,
                   "ANYY_TEST_TG_SECRET": SECRET, "OPENAI_API_KEY": "k",
                   "ANYY_TOOL_RESULTS_DIR": str(tmp_path / f"r{i}" / "results")}
            child = await start("run", cfg, env, pause_at=pause_at[i], close_stdin=False)
            children.append(child)
            await child.wait_for_stderr("telegram: up")
            readers.append(asyncio.create_task(drain(child)))
        yield children
    finally:
        for child in children:
            if child.process.returncode is None:
                await child.terminate()
        await asyncio.gather(*readers, return_exceptions=True)


def webhook(port: int) -> str:
    return (f'mode = "webhook"\nwebhook_url = "http://127.0.0.1:{port}/tg/hook"\nport = {port}\n'
            'secret_token_env = "ANYY_TEST_TG_SECRET"')


async def post(port: int, update: dict[str, Any]) -> int:
    status, _ = await raw_post(port, "/tg/hook", 0, secret=SECRET, body=json.dumps(update).encode())
    return status


def database(cluster: PgCluster) -> str:
    return cluster.url(cluster.database())


async def remind_soon(url: str, text: str, after_s: float) -> None:
    """A reminder row due in `after_s`, written before the residents start (both schedule it)."""
    async with Store("unused.db", url=url) as store:
        await AutomationService(store, ZoneInfo("UTC"), Outbox(store).enqueue).create(
            f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID)), "soon",
            Once(type="once", at=utcnow() + timedelta(seconds=after_s)), Reminder(kind="reminder", text=text))


async def test_two_webhook_residents_answer_every_update_once_and_fire_a_reminder_once(
        tmp_path, model, tg, pg_cluster, unused_tcp_port_factory):
    ports = [unused_tcp_port_factory(), unused_tcp_port_factory()]
    url = database(pg_cluster)
    await remind_soon(url, "stretch now", after_s=12)
    async with residents(tmp_path, model, tg, url, [webhook(p) for p in ports], [None, None]) as children:
        updates = [tg.message(f"message {i}", inject=False) for i in range(40)]
        sends = [post(ports[i % 2], u) for i, u in enumerate(updates)]
        sends += [post(ports[(i + 1) % 2], u) for i, u in enumerate(updates) if i % 4 == 0]  # redelivered elsewhere
        assert set(await asyncio.gather(*sends)) == {200}
        await tg.wait_calls("sendMessage", count=41, timeout=120)
        for child in children:
            assert await child.terminate() == 0  # a graceful stop flushes anything still pending
    replies = [t for t in texts(tg) if "stretch now" not in t]
    assert collections.Counter(replies) == collections.Counter(f"echo: message {i}" for i in range(40))
    assert len([t for t in texts(tg) if "stretch now" in t]) == 1


async def test_a_resident_killed_mid_turn_is_finished_by_the_other(tmp_path, model, tg, pg_cluster,
                                                                   unused_tcp_port_factory):
    ports = [unused_tcp_port_factory(), unused_tcp_port_factory()]
    async with residents(tmp_path, model, tg, database(pg_cluster), [webhook(p) for p in ports],
                         ["model.before_call", None]) as (first, _second):
        assert await post(ports[0], tg.message("finish me")) == 200
        await logged(first, "anyy: paused at model.before_call")
        await first.kill()
        killed = time.monotonic()
        await tg.wait_calls("sendMessage", timeout=TAKEOVER_S + 15)
        took = time.monotonic() - killed
    assert texts(tg) == ["echo: finish me"]
    assert took < TAKEOVER_S, f"the other resident took {took:.0f} s"


async def test_only_one_polling_resident_polls_and_the_other_takes_over_when_it_dies(
        tmp_path, model, tg, pg_cluster):
    async with residents(tmp_path, model, tg, database(pg_cluster), ["", ""], [None, None]) as children:
        await tg.wait_calls("getUpdates")

        def holders() -> list[int]:
            return [i for i, c in enumerate(children) if any("pull_lease_taken" in line for line in c.stderr_lines)]

        waits = [asyncio.create_task(logged(c, "pull_lease_taken")) for c in children]
        _, pending = await asyncio.wait(waits, timeout=SUBPROCESS_S, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        assert len(holders()) == 1
        poller = holders()[0]
        tg.message("one")
        await tg.wait_calls("sendMessage")
        await children[poller].kill()
        other = children[1 - poller]
        await logged(other, "pull_lease_taken")
        tg.message("two")
        await tg.wait_calls("sendMessage", count=2, timeout=SUBPROCESS_S)
    assert texts(tg) == ["echo: one", "echo: two"]


async def test_an_approval_pressed_on_both_residents_at_once_applies_once(
        tmp_path, model, tg, pg_cluster, unused_tcp_port_factory, email_section, smtp_recorder):
    ports = [unused_tcp_port_factory(), unused_tcp_port_factory()]
    email = "[email]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in email_section.items())
    model.script(tool_call("email_send", {"to": ["anna@example.net"], "subject": "Lunch", "body": "At 12"}),
                 reply("Asked for approval."), reply("Sent."))
    async with residents(tmp_path, model, tg, database(pg_cluster), [webhook(p) for p in ports], [None, None],
                         extra=email):
        assert await post(ports[0], tg.message("send an email to anna: lunch is at 12")) == 200

        def prompt() -> tuple[int, str] | None:
            with tg.lock:
                for (_, message_id), m in tg.messages.items():
                    for row in m.get("reply_markup", {}).get("inline_keyboard", []):
                        for key in row:
                            if key["text"].startswith("Approve"):
                                return message_id, key["callback_data"]
            return None

        message_id, data = await tg.wait(prompt, timeout=SUBPROCESS_S, what="the approval prompt")
        first, second = tg.press(message_id, data), tg.press(message_id, data)  # a double tap
        statuses = await asyncio.gather(post(ports[1], first), post(ports[0], second), post(ports[0], first))
        assert set(statuses) == {200}
        assert await asyncio.to_thread(smtp_recorder.data_arrived.wait, SUBPROCESS_S)
        await tg.wait(lambda: "Sent." in texts(tg) or None, timeout=SUBPROCESS_S, what="the follow-up")
    assert len(smtp_recorder.received) == 1
