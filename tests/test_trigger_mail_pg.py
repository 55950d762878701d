"""Two residents on one PostgreSQL database watch a folder as one: one holds the folder's watch lease,
each message fires once whichever resident sees it, and when the holder stops (or is killed -9) the
other takes over."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.automations.scheduler import AutomationService
from store import leases
from store.claims import Claims
from store.db import Store
from store.records import Origin
from tests.fixtures.mail import PASSWORD, USER
from tests.support.mail_drop import MailDrop
from tests.support.telegram_api import OWNER_ID
from tests.test_scale_residents import logged, residents
from toolsets.registry import TOOLSETS
from toolsets.schedule import Reminder, parse_schedule

OWNER = "console:owner"
CONSOLE = Origin(surface="console", chat_id="local")


@pytest.fixture(scope="session")
def mail_drop(mail_servers: Any) -> Iterator[MailDrop]:
    drop = MailDrop(mail_servers.imap_port, USER, PASSWORD)
    drop.start()
    yield drop
    drop.stop()


async def wait_until(check: Any, what: str, timeout: float = 40.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.1)


async def test_one_watch_per_folder_across_residents_and_a_takeover(
        start_console: Any, email_config: Any, pg_cluster: Any, mail_drop: MailDrop, tmp_path: Any) -> None:
    url = pg_cluster.url(pg_cluster.database())
    config = email_config()
    config.store.url = url
    a = await start_console(config=config, toolsets=TOOLSETS, store_owner=f"{leases.OWNER}/a")
    b = await start_console(config=config, toolsets=TOOLSETS, store_owner=f"{leases.OWNER}/b")
    folder = mail_drop.new_folder()
    await a.gw.services["automations"].create(OWNER, CONSOLE, "mail",
                                              parse_schedule({"type": "email", "folder": folder}),
                                              Reminder(kind="reminder", text="📧 {subject}"))
    for h in (a, b):
        await h.gw.triggers.mail.refresh()
    lease = f"watch:mail:default:{folder}"
    claims = Claims(a.gw.store)
    await wait_until(lambda: _swept(a, b, folder), "a watch swept the folder")
    holder = await claims.holder(lease)
    assert holder in (a.gw.store.owner, b.gw.store.owner)
    watching, other = (a, b) if holder == a.gw.store.owner else (b, a)
    assert watching.gw.triggers.mail.folders[("default", folder)].watching
    assert not other.gw.triggers.mail.folders[("default", folder)].watching  # no second watch

    for n in range(3):
        await mail_drop.asend(folder, subject=f"shared {n}")
    outputs = {"a": "", "b": ""}

    async def seen(count: int) -> bool:
        outputs["a"] += a.new_output()
        outputs["b"] += b.new_output()
        return sum(o.count("📧 shared") for o in outputs.values()) >= count

    await wait_until(lambda: seen(3), "three notices")
    await watching.gw.stop()  # hands the lease back
    claims = Claims(other.gw.store)
    await wait_until(lambda: _holds(claims, lease, other.gw.store.owner), "the other resident took the watch")
    await mail_drop.asend(folder, subject="shared after")
    await wait_until(lambda: seen(4), "the notice after the takeover", timeout=30)
    await other.gw.idle()
    outputs["a"] += a.new_output()
    outputs["b"] += b.new_output()
    lines = sorted(line for o in outputs.values() for line in o.splitlines() if "📧" in line)
    assert lines == ["📧 shared 0", "📧 shared 1", "📧 shared 2", "📧 shared after"]


async def _swept(a: Any, b: Any, folder: str) -> bool:
    watchers = [h.gw.triggers.mail.folders.get(("default", folder)) for h in (a, b)]
    return any(w is not None and w.swept.is_set() for w in watchers)


async def _holds(claims: Claims, lease: str, owner: str) -> bool:
    return await claims.holder(lease) == owner


async def test_a_killed_watcher_is_taken_over_within_a_minute(
        tg: Any, model: Any, pg_cluster: Any, mail_servers: Any, mail_drop: MailDrop, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `anyy run` on one PostgreSQL database; the one watching the folder is killed -9; the other
    watches it within a minute and the message that came meanwhile fires once."""
    monkeypatch.setenv("ANYY_TEST_MAIL_PASSWORD", PASSWORD)
    url = pg_cluster.url(pg_cluster.database())
    folder = mail_drop.new_folder()
    email = (f'[email]\nimap_host = "127.0.0.1"\nimap_port = {mail_servers.imap_port}\nimap_security = "none"\n'
             f'smtp_host = "127.0.0.1"\nsmtp_port = {mail_servers.smtp_port}\nsmtp_security = "none"\n'
             f'username = "{USER}"\npassword_env = "ANYY_TEST_MAIL_PASSWORD"\nfrom_address = "{USER}"\n'
             'timeout_s = 5\n')
    async with residents(tmp_path, model, tg, url, ["", ""], [None, None], extra=email) as children:
        store = await Store(tmp_path / "admin.db", url=url).open()

        async def never(*_: object) -> int:
            raise AssertionError("admin mode delivers nothing")

        await AutomationService(store, ZoneInfo("UTC"), never).create(
            f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID)), "mail",
            parse_schedule({"type": "email", "folder": folder}), Reminder(kind="reminder", text="📧 {subject}"))
        started = f"mail_watch_started lease=watch:mail:default:{folder}"

        async def one_watches() -> bool:
            return any(started in line for c in children for line in c.stderr_lines)

        await wait_until(one_watches, "a resident watches the folder")
        holder = next(c for c in children if any(started in line for line in c.stderr_lines))
        survivor = next(c for c in children if c is not holder)
        await logged(holder, "mail_watch_baseline")
        await holder.kill()
        await mail_drop.asend(folder, subject="while one was dead")
        await logged(survivor, started, timeout=60)
        await tg.wait(lambda: _notices(tg) or None, timeout=60, what="the notice")
        await asyncio.sleep(1)  # a second notice would show by now
        assert _notices(tg) == ["📧 while one was dead"]
        await store.close()


def _notices(tg: Any) -> list[str]:
    with tg.lock:
        return [m["text"] for (_c, _), m in sorted(tg.messages.items())
                if m["from"]["id"] == tg.id and m["text"].startswith("📧")]
