"""Two residents on one PostgreSQL database watch a folder as one: one holds the folder's watch lease,
each message fires once whichever resident sees it, and when the holder stops the other takes over."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from store import leases
from store.claims import Claims
from store.records import Origin
from tests.fixtures.mail import PASSWORD, USER
from tests.support.mail_drop import MailDrop
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
