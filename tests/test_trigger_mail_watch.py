"""The mail watch's own recovery, against the real IMAP server behind a relay the test controls: a dropped
connection and a server refusing for a while are retried with a growing backoff, and the mail that came
meanwhile fires once after the reconnect; a push IDLE never delivers is made up for by the reconcile
sweep. tests/test_trigger_mail.py has the rest of the email triggers."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.automations.mail_watch import MailWatcher
from store.records import Origin
from tests.fixtures.mail import PASSWORD, USER, Relay
from tests.support.mail_drop import MailDrop
from toolsets.registry import TOOLSETS
from toolsets.schedule import parse_action, parse_schedule

OWNER = "console:owner"
CONSOLE = Origin(surface="console", chat_id="local")


@pytest.fixture(scope="session")
def mail_drop(mail_servers: Any) -> Iterator[MailDrop]:
    drop = MailDrop(mail_servers.imap_port, USER, PASSWORD)  # delivers straight to the server, not the relay
    drop.start()
    yield drop
    drop.stop()


@pytest.fixture
def relay(mail_servers: Any) -> Iterator[Relay]:
    mail_servers.relay.reset()
    yield mail_servers.relay
    mail_servers.relay.reset()


@pytest.fixture
async def resident(start_console: Any, email_config: Any, mail_servers: Any) -> Any:
    """A resident whose mailbox is reached through the relay; an attempt the relay refuses fails after 2 s
    (the client's wait for the server's greeting)."""
    return await start_console(config=email_config(imap_port=mail_servers.relay_port, timeout_s=2),
                               toolsets=TOOLSETS)


async def watching(h: Any, folder: str) -> str:
    """Create a reminder trigger on `folder` and wait until its watch has looked at the folder once."""
    rec = await h.gw.services["automations"].create(
        OWNER, CONSOLE, "mail", parse_schedule({"type": "email", "folder": folder}),
        parse_action({"kind": "reminder", "text": "📧 {subject}"}))
    await h.gw.triggers.mail.refresh()
    await h.gw.triggers.mail.folders[("default", folder)].swept.wait()
    return str(rec.id)


async def until(check: Any, what: str, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.05)


async def test_a_dropped_watch_reconnects_with_backoff_and_fires_the_mail_of_meanwhile_once(
        resident: Any, relay: Relay, mail_drop: MailDrop, model: Any) -> None:
    h = resident
    folder = mail_drop.new_folder()
    automation = await watching(h, folder)
    relay.refusing = True  # the server goes away and stays away for three attempts
    before = len(relay.opened)
    relay.cut()
    await until(lambda: len(relay.opened) > before, "the first attempt to reconnect")
    await mail_drop.asend(folder, subject="while away")
    await until(lambda: len(relay.opened) >= before + 3, "three attempts to reconnect")
    attempts = relay.opened[before:before + 3]
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # Each gap is the refused attempt's own time plus the backoff before the next: 2 s, then 4 s.
    assert gaps[0] >= 2 and gaps[1] - gaps[0] >= 1.5, gaps
    assert "📧" not in h.new_output()

    relay.refusing = False
    out = await h.wait_for("📧 while away", timeout=30)  # the sweep that starts every reconnect
    await mail_drop.asend(folder, subject="after")  # IDLE works again on the new connection
    out += await h.wait_for("📧 after")
    await h.gw.idle()
    out += h.new_output()
    assert [line for line in out.splitlines() if "📧" in line] == ["📧 while away", "📧 after"]
    assert len(await h.gw.services["automations"].history(OWNER, automation)) == 2
    assert model.requests == []


async def short_reconcile(h: Any, reconcile_s: float) -> None:
    """Replace the resident's mail watcher with one whose reconcile sweep comes every `reconcile_s`."""
    await h.gw.triggers.mail.stop()
    service = h.gw.services["automations"]
    h.gw.triggers.mail = MailWatcher(h.gw.store, service.list_all, service.fire_event, h.gw.outbox.enqueue,
                                     h.gw.services["email"], reconcile_s=reconcile_s)
    await h.gw.triggers.mail.start()


async def test_mail_whose_idle_push_is_lost_is_found_by_the_reconcile_sweep(
        resident: Any, relay: Relay, mail_drop: MailDrop, model: Any) -> None:
    h = resident
    await short_reconcile(h, 1.5)
    folder = mail_drop.new_folder()
    await watching(h, folder)
    connections = len(relay.opened)
    relay.muting = True  # the server's EXISTS push never reaches the watch
    await mail_drop.asend(folder, subject="unannounced")
    out = await h.wait_for("📧 unannounced", timeout=20)
    await h.gw.idle()
    assert relay.muted >= 1  # the push was sent, and lost
    assert len(relay.opened) == connections  # found on the same connection: a sweep, not a reconnect
    assert (out + h.new_output()).count("📧") == 1
