"""The outbox around a reply's write: a write that fails or whose caller was cancelled mid-write still
leaves delivery going (the dispatcher is woken either way), and a kill -9 right before the send delivers
the reply once after restart. Through the real Store and a real console surface."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.outbox import OutboxService
from gateway.surfaces.console import ConsoleSurface
from store.db import Store
from store.records import Origin, Outbound
from tests.fixtures.model import reply
from tests.support.cli import model_config
from tests.support.crash import chat_once, start
from tests.support.postgres import Backend

pytestmark = pytest.mark.both_backends

ORIGIN = Origin(surface="console", chat_id="local")


@pytest.fixture
async def delivery(tmp_path: Path, backend: Backend) -> AsyncIterator[tuple[OutboxService, io.StringIO]]:
    """A started outbox on a fresh store delivering to a console; its dispatcher idle."""
    out = io.StringIO()
    async with Store(tmp_path / "anyy.db", url=backend.url) as store:
        outbox = OutboxService(store)
        outbox.start({"console": ConsoleSurface(out=out)})
        await idle(outbox)
        yield outbox, out
        await outbox.stop()


async def idle(outbox: OutboxService) -> None:
    await asyncio.wait_for(outbox.wait_idle(), 10)


async def row(outbox: OutboxService, item_id: int) -> tuple[str, str | None]:
    item = await outbox.repo.get(item_id)
    assert item is not None
    return item.state, item.sending_at


async def test_a_failed_write_sends_nothing_and_the_next_reply_goes_as_usual(delivery):
    outbox, out = delivery

    def refuse(db: Any) -> None:
        raise RuntimeError("the answer could not be recorded")

    with pytest.raises(RuntimeError):
        await outbox.put(Outbound(origin=ORIGIN, text="Never written."), "reply-1", refuse)
    await idle(outbox)
    item_id = await outbox.put(Outbound(origin=ORIGIN, text="Written."), "reply-2")
    await idle(outbox)
    assert await row(outbox, item_id) == ("sent", None)
    assert "Never written." not in out.getvalue() and "Written." in out.getvalue()


async def test_a_reply_whose_writer_was_cancelled_mid_write_is_still_delivered_once(delivery):
    """The write ran (the row stored) but its caller was gone when the answer came back: the dispatcher,
    woken all the same, finds the row and delivers it once (not after the next poll)."""
    outbox, out = delivery
    started, release = threading.Event(), threading.Event()

    def slow(db: Any) -> None:  # on the store's thread: hold the write until the caller has been cancelled
        started.set()
        release.wait(10)

    writer = asyncio.create_task(outbox.put(Outbound(origin=ORIGIN, text="Still here."), "reply", slow))
    assert await asyncio.to_thread(started.wait, 10)
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    release.set()
    await idle(outbox)
    [item] = await outbox.repo.due("console") or [None]
    assert item is None  # nothing left pending
    assert out.getvalue().count("Still here.") == 1


async def test_killed_after_the_reply_was_written_it_is_delivered_once_after_restart(tmp_path, home, model):
    """kill -9 with the reply's row written and marked as being sent (by the dispatcher's query),
    its send not begun: the next start delivers it once, and the turn is not run again."""
    cfg = model_config(tmp_path, model, f'[store]\npath = "{tmp_path / "store" / "anyy.db"}"\n\n'
                                        "[runtime]\nstream = false\n")
    model.script(reply("The kettle is on."))
    child = await start("chat", cfg, home, lines=["is the tea ready?"], pause_at="outbox.before_send")
    await child.wait_paused("outbox.before_send")
    await child.kill()
    async with Store(tmp_path / "store" / "anyy.db") as store:
        marked = await store.run(lambda db: db.execute("SELECT state, sending_at FROM outbox").fetchall())
        done = await store.run(lambda db: db.execute("SELECT state FROM inbound_queue").fetchall())
    assert [(state, sending_at is not None) for state, sending_at in marked] == [("pending", True)]
    assert [tuple(r) for r in done] == [("done",)]
    out = await chat_once(cfg, home)
    assert out.splitlines() == ["The kettle is on."]
    assert len(model.requests) == 1
