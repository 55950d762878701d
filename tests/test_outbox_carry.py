"""A reply written while its surface's dispatcher is idle brings the dispatcher's query along
(`OutboxService.put`): one store round trip writes the row, reads what is due and marks the new message
as being sent; the dispatcher hands it to its lane without asking again. Counted through the real Store
(its `run` wrapped in the test only), with a real console surface; on PostgreSQL, where the dispatcher
claims rows for itself, the write goes alone as before. Across a kill -9 right before the send, the
reply goes out once."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import AsyncIterator, Callable
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
from tests.support.trips import Trips

pytestmark = pytest.mark.both_backends

ORIGIN = Origin(surface="console", chat_id="local")


@pytest.fixture
async def delivery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   backend: Backend) -> AsyncIterator[tuple[OutboxService, io.StringIO, Trips]]:
    """A started outbox on a fresh store delivering to a console; its dispatcher idle."""
    trips = Trips()
    trips.install(monkeypatch)  # before the store is made: its batcher binds `run`
    out = io.StringIO()
    async with Store(tmp_path / "anyy.db", url=backend.url) as store:
        outbox = OutboxService(store)
        outbox.start({"console": ConsoleSurface(out=out)})
        await idle(outbox)
        yield outbox, out, trips
        await outbox.stop()


async def idle(outbox: OutboxService) -> None:
    await asyncio.wait_for(outbox.wait_idle(), 10)


def trips_per_reply(outbox: OutboxService) -> int:
    """The write with the dispatcher's query, then the delivery recorded; on a shared store the write,
    the dispatcher's claim, the delivery recorded."""
    return 3 if outbox.repo.store.shared else 2


async def row(outbox: OutboxService, item_id: int) -> tuple[str, str | None]:
    item = await outbox.repo.get(item_id)
    assert item is not None
    return item.state, item.sending_at


async def test_a_reply_to_an_idle_dispatcher_is_written_and_handed_over_in_one_round_trip(delivery):
    outbox, out, trips = delivery
    for n, text in enumerate(["Hello.", "And hello again."]):
        before = trips.count
        item_id = await outbox.put(Outbound(origin=ORIGIN, text=text), f"reply-{n}")
        await idle(outbox)
        assert trips.count - before == trips_per_reply(outbox)
        assert await row(outbox, item_id) == ("sent", None)
    assert out.getvalue().split("\n").count("Hello.") == 1 and "And hello again." in out.getvalue()


async def test_a_failed_write_brings_nothing_and_the_next_reply_goes_as_usual(delivery):
    outbox, out, trips = delivery

    def refuse(db: Any) -> None:
        raise RuntimeError("the answer could not be recorded")

    with pytest.raises(RuntimeError):
        await outbox.put(Outbound(origin=ORIGIN, text="Never written."), "reply-1", refuse)
    await idle(outbox)
    before = trips.count
    item_id = await outbox.put(Outbound(origin=ORIGIN, text="Written."), "reply-2")
    await idle(outbox)
    assert trips.count - before == trips_per_reply(outbox)
    assert await row(outbox, item_id) == ("sent", None)
    assert "Never written." not in out.getvalue() and "Written." in out.getvalue()


async def test_a_reply_whose_writer_was_cancelled_mid_write_is_still_delivered_once(delivery):
    """The write ran (row stored and marked) but its caller was gone when the answer came back: the
    dispatcher asks the store itself and delivers the row, once."""
    outbox, out, trips = delivery
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
    """kill -9 with the reply's row written and marked as being sent (in the reply's own transaction now),
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
