"""The automation service with a real APScheduler, the real clock and the real outbox.

Schedules are seconds long. Tests wait on deliveries (or on the service's own log line for a firing
it skips), never on fixed sleeps, except to let a due time pass while the service is down.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
import pytest_asyncio

from gateway.automations.scheduler import AutomationService
from store.automations import Automations
from store.db import Store
from store.outbox import Outbox
from store.records import AutomationRecord, Origin, Outbound, parse_iso, utcnow
from toolsets.schedule import AutomationError, Cron, Interval, Once, Prompt, Reminder, when_label

pytestmark = pytest.mark.both_backends

BERLIN = ZoneInfo("Europe/Berlin")
ALICE, BOB = "telegram:1", "telegram:2"
CHAT = Origin(surface="telegram", chat_id="100", thread_id="7")


class Deliveries:
    """The real outbox, watched: every enqueue call is recorded when it returns."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.outbox = Outbox(store)
        self.calls: list[tuple[str, Outbound, datetime]] = []
        self._changed = asyncio.Condition()

    async def enqueue(self, outbound: Outbound, key: str) -> int:
        item = await self.outbox.enqueue(outbound, key)
        async with self._changed:
            self.calls.append((key, outbound, utcnow()))
            self._changed.notify_all()
        return item

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[str, Outbound, datetime]]:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.calls) >= count), timeout)
        return self.calls

    async def rows(self) -> list[tuple[str, str]]:
        """(dedupe key, text) of every outbox row."""
        items = await self.store.run(lambda db: [r[0] for r in db.execute("SELECT id FROM outbox ORDER BY id")])
        out = []
        for item_id in items:
            item = await self.outbox.get(item_id)
            assert item is not None
            out.append((item.dedupe_key or "", item.outbound.text))
        return out


class LogWatch(logging.Handler):
    """Sets an event when the service logs a line containing every given fragment."""

    def __init__(self, *fragments: str) -> None:
        super().__init__(logging.INFO)
        self.fragments = fragments
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if all(f in record.getMessage() for f in self.fragments):
            self.seen.set()


@pytest_asyncio.fixture(loop_scope="function")
async def deliveries(store: Store) -> Deliveries:
    return Deliveries(store)


@pytest_asyncio.fixture(loop_scope="function")
async def make(store: Store, deliveries: Deliveries) -> AsyncIterator[Callable[..., AutomationService]]:
    made: list[AutomationService] = []

    def factory(**options: object) -> AutomationService:
        options.setdefault("retry_delays", (0.05, 0.05))
        service = AutomationService(options.pop("store", store), BERLIN, options.pop("enqueue", deliveries.enqueue),
                                    options.pop("run_prompt", None), **options)  # type: ignore[arg-type]
        made.append(service)
        return service

    yield factory
    for service in made:
        if service.running:
            await service.shutdown()


@pytest.fixture
def watch() -> Callable[..., LogWatch]:
    logger = logging.getLogger("gateway.automations.scheduler")
    handlers: list[LogWatch] = []
    level = logger.level

    def add(*fragments: str) -> LogWatch:
        handler = LogWatch(*fragments)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        handlers.append(handler)
        return handler

    yield add
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


def once_in(seconds: float) -> Once:
    return Once(type="once", at=utcnow() + timedelta(seconds=seconds))


def reminder(text: str) -> Reminder:
    return Reminder(kind="reminder", text=text)


async def sleep_until(stamp: str, margin_s: float = 0.3) -> None:
    """Let a due time pass (while the service is down there is nothing to wait on)."""
    await asyncio.sleep(max(0.0, (parse_iso(stamp) - utcnow()).total_seconds()) + margin_s)


async def test_a_reminder_arrives_once_on_time_in_its_chat(make, deliveries, store):
    service = make()
    await service.start()
    rec = await service.create(ALICE, CHAT, "call mum", once_in(1.0), reminder("call mum"))
    assert rec.schedule["timezone"] == "Europe/Berlin"  # the owner's zone, written out
    (key, outbound, at), = await deliveries.wait_for(1)
    assert outbound.text == "⏰ call mum" and outbound.origin == CHAT
    assert key == f"automation:{rec.id}:{rec.next_run_at}"
    assert (at - parse_iso(rec.next_run_at or "")).total_seconds() < 1.0
    await service.shutdown()  # waits for the run to be finished
    run, = await service.history(ALICE, rec.id)
    assert (run.status, run.late, run.scheduled_for) == ("delivered", False, rec.next_run_at)
    done = await Automations(store).get(rec.id)
    assert done is not None and done.next_run_at is None and done.last_run_at == rec.next_run_at
    assert await deliveries.rows() == [(key, "⏰ call mum")]


async def test_an_interval_fires_every_slot_until_deleted(make, deliveries):
    service = make()
    await service.start()
    rec = await service.create(ALICE, CHAT, "stretch", Interval(type="every", mode="interval", interval="1s"),
                               reminder("stretch"))
    calls = await deliveries.wait_for(3)
    slots = [parse_iso(key.split(":", 2)[2]) for key, _, _ in calls[:3]]  # automation:<id>:<slot>
    assert [b - a for a, b in pairwise(slots)] == [timedelta(seconds=1)] * 2
    await service.delete(ALICE, rec.id)
    count = len(deliveries.calls)
    with pytest.raises(TimeoutError):
        await deliveries.wait_for(count + 1, timeout=1.5)


async def test_down_at_the_due_time_delivers_once_at_start_marked_late(make, deliveries):
    first = make()
    await first.start()
    rec = await first.create(ALICE, CHAT, "call mum", once_in(1.0), reminder("call mum"))
    await first.shutdown()  # "restarted at 8:59"
    # "Down at 9:00", and for longer than APScheduler's default misfire grace (1 s), which would drop it.
    await sleep_until(rec.next_run_at or "", margin_s=1.5)
    second = make()
    await second.start()
    (_, outbound, _), = await deliveries.wait_for(1)
    due = when_label(parse_iso(rec.next_run_at or ""), BERLIN, utcnow())
    assert outbound.text == f"⏰ (late — was due {due}) call mum"
    await second.shutdown()
    third = make()
    await third.start()
    await third.shutdown()
    run, = await third.history(ALICE, rec.id)
    assert run.late and run.status == "delivered"
    assert len(await deliveries.rows()) == 1 and len(deliveries.calls) == 1


async def test_restarts_around_a_recurring_slot_run_it_once_then_it_continues(make, deliveries, store):
    first = make()
    await first.start()
    rec = await first.create(ALICE, CHAT, "water", Interval(type="every", mode="interval", interval="3s"),
                             reminder("drink water"))
    await first.shutdown()
    slot = parse_iso(rec.next_run_at or "")
    await sleep_until(rec.next_run_at or "")
    for _ in range(2):  # stop and start twice before the next slot
        service = make()
        await service.start()
        await deliveries.wait_for(1)
        await service.shutdown()
    run, = await first.history(ALICE, rec.id)
    assert run.late and run.scheduled_for == rec.next_run_at
    row = await Automations(store).get(rec.id)
    assert row is not None and parse_iso(row.next_run_at or "") == slot + timedelta(seconds=3)  # phase kept
    assert len(deliveries.calls) == 1
    resident = make()
    await resident.start()
    key, outbound, _ = (await deliveries.wait_for(2))[1]
    assert outbound.text == "⏰ drink water" and key.endswith(row.next_run_at or "")  # on schedule, not late


async def test_two_services_on_one_store_deliver_a_slot_once(make, deliveries, store, tmp_path, watch):
    other_store = await Store(store.path, url=store.url).open()  # a second process's connection
    try:
        one = make()
        await one.start()
        rec = await one.create(ALICE, CHAT, "call mum", once_in(1.5), reminder("call mum"))
        two = make(store=other_store)
        await two.start()
        loser = watch("automation", rec.id, "slot")  # "slot already claimed" or "skipped ... slot=..."
        await deliveries.wait_for(1)
        await asyncio.wait_for(loser.seen.wait(), 5)
        await one.shutdown()
        await two.shutdown()
        assert len(await one.history(ALICE, rec.id)) == 1
        assert len(deliveries.calls) == 1 and len(await deliveries.rows()) == 1
    finally:
        await other_store.close()


async def test_a_failed_delivery_is_retried_into_one_message(make, deliveries):
    attempts = []

    async def flaky(outbound: Outbound, key: str) -> int:
        attempts.append(key)
        if len(attempts) == 1:
            raise RuntimeError("database is locked")  # nothing written
        item = await deliveries.enqueue(outbound, key)
        if len(attempts) == 2:
            raise ConnectionError("written, but the answer was lost")
        return item

    service = make(enqueue=flaky)
    await service.start()
    rec = await service.create(ALICE, CHAT, "call mum", once_in(1.0), reminder("call mum"))
    await deliveries.wait_for(2)
    await service.shutdown()
    assert len(attempts) == 3 and len(set(attempts)) == 1
    assert await deliveries.rows() == [(attempts[0], "⏰ call mum")]
    run, = await service.history(ALICE, rec.id)
    assert run.status == "delivered"


async def test_a_run_interrupted_after_its_claim_is_delivered_at_start(make, deliveries, store):
    admin = make()
    rec = await admin.create(ALICE, CHAT, "call mum", once_in(60), reminder("call mum"))
    repo = Automations(store)
    run_id = await repo.claim_run(rec.id, rec.next_run_at or "", next_run_at=None)  # then the process died
    service = make()
    await service.start()
    (key, outbound, _), = await deliveries.wait_for(1)
    await service.shutdown()
    assert key == f"automation:{rec.id}:{rec.next_run_at}" and outbound.text == "⏰ call mum"
    run = await repo.get_run(run_id or 0)
    assert run is not None and run.status == "delivered"
    again = make()
    await again.start()
    await again.shutdown()
    assert len(deliveries.calls) == 1


async def test_the_resident_skips_rows_deleted_or_disabled_elsewhere(make, deliveries, store, watch):
    resident = make(sync_interval_s=3600)
    await resident.start()
    gone = await resident.create(ALICE, CHAT, "a", once_in(1.0), reminder("a"))
    paused = await resident.create(ALICE, CHAT, "b", once_in(1.0), reminder("b"))
    skipped_gone = watch("skipped", gone.id, "reason=deleted")
    skipped_paused = watch("skipped", paused.id, "reason=disabled")
    admin = make()  # the CLI: rows only
    await admin.admin_delete(gone.id)
    await Automations(store).update(paused.id, "admin", enabled=False)
    await asyncio.wait_for(asyncio.gather(skipped_gone.seen.wait(), skipped_paused.seen.wait()), 5)
    assert deliveries.calls == [] and await Automations(store).unfinished_runs() == []


async def test_rows_created_by_another_process_are_picked_up(make, deliveries):
    resident = make(sync_interval_s=0.2)
    await resident.start()
    chat_process = make()  # `anyy chat` while the resident holds the lock
    rec = await chat_process.create(ALICE, CHAT, "stretch", once_in(1.5), reminder("stretch"))
    (key, outbound, _), = await deliveries.wait_for(1)
    assert key == f"automation:{rec.id}:{rec.next_run_at}" and outbound.text == "⏰ stretch"


async def test_prompt_automations_deliver_the_reply_or_a_failure_notice(make, deliveries):
    asked: list[AutomationRecord] = []
    failing = False

    async def run_prompt(rec: AutomationRecord, slot: str) -> str:
        asked.append(rec)
        if failing:
            raise RuntimeError("model unavailable")
        return "3 new mails, nothing urgent."

    service = make(run_prompt=run_prompt)
    rec = await service.create(ALICE, CHAT, "inbox", Cron(type="every", mode="cron", cron="0 8 * * *"),
                               Prompt(kind="prompt", prompt="summarize my inbox"))
    run = await service.run_now(ALICE, rec.id)
    assert (run.status, run.output) == ("delivered", "3 new mails, nothing urgent.")
    assert asked[0].id == rec.id and asked[0].action == {"kind": "prompt", "prompt": "summarize my inbox"}
    failing = True
    run = await service.run_now(ALICE, rec.id)
    assert run.status == "failed" and run.output == "⚠️ Automation “inbox” failed: model unavailable"
    assert [o.text for _, o, _ in deliveries.calls] == ["3 new mails, nothing urgent.", run.output]
    no_model = make()
    assert (await no_model.run_now(ALICE, rec.id)).status == "failed"


async def test_run_now_leaves_the_schedule_alone(make, deliveries):
    service = make()
    rec = await service.create(ALICE, CHAT, "water", Interval(type="every", mode="interval", interval="1h"),
                               reminder("drink water"))
    run = await service.run_now(ALICE, rec.id)
    after, = await service.list(ALICE)
    assert run.status == "delivered" and after.next_run_at == rec.next_run_at
    assert after.last_run_at == run.scheduled_for
    assert [o.text for _, o, _ in deliveries.calls] == ["⏰ drink water"]


async def test_updates_move_the_job_and_pausing_clears_it(make, deliveries):
    service = make()
    await service.start()
    rec = await service.create(ALICE, CHAT, "call mum", once_in(600), reminder("call mum"))
    moved = await service.update(ALICE, rec.id, schedule=once_in(1.0), action=reminder("call mum now"))
    (key, outbound, _), = await deliveries.wait_for(1)
    assert outbound.text == "⏰ call mum now" and key.endswith(moved.next_run_at or "")
    water = await service.create(ALICE, CHAT, "water", Interval(type="every", mode="interval", interval="1h"),
                                 reminder("drink water"))
    paused = await service.update(ALICE, water.id, enabled=False)
    assert (paused.enabled, paused.next_run_at) == (False, None)
    with pytest.raises(AutomationError, match="paused"):
        await service.run_now(ALICE, water.id)
    resumed = await service.update(ALICE, water.id, enabled=True)
    assert resumed.enabled and resumed.next_run_at is not None
    with pytest.raises(AutomationError, match="nothing to change"):
        await service.update(ALICE, water.id)


async def test_only_the_owner_sees_or_changes_an_automation(make):
    service = make()
    rec = await service.create(ALICE, CHAT, "call mum", once_in(600), reminder("call mum"))
    assert await service.list(BOB) == []
    for attempt in (service.update(BOB, rec.id, name="mine now"), service.delete(BOB, rec.id),
                    service.run_now(BOB, rec.id), service.history(BOB, rec.id)):
        with pytest.raises(AutomationError, match=f"no automation {rec.id}"):
            await attempt
    assert [r.name for r in await service.list(ALICE)] == ["call mum"]
    assert [r.id for r in await service.list_all()] == [rec.id]


async def test_dst_and_past_times_with_an_injected_clock(make):
    now = datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)  # the day before the spring jump
    service = make(clock=lambda: now.astimezone(UTC))
    daily = await service.create(ALICE, CHAT, "standup", Cron(type="every", mode="cron", cron="0 9 * * *"),
                                 reminder("standup"))
    assert daily.next_run_at == "2026-03-29T07:00:00.000000+00:00"  # 09:00 CEST
    nightly = await service.create(ALICE, CHAT, "backup", Cron(type="every", mode="cron", cron="30 2 * * *"),
                                   reminder("backup"))
    assert nightly.next_run_at == "2026-03-29T01:00:00.000000+00:00"  # 02:30 does not exist: 03:00 CEST
    with pytest.raises(AutomationError, match=r"2026-03-28 11:00 \(Europe/Berlin\) is in the past"):
        await service.create(ALICE, CHAT, "gone", Once(type="once", at=datetime(2026, 3, 28, 11, 0)), reminder("x"))
    with pytest.raises(AutomationError, match="is in the past"):
        await service.update(ALICE, daily.id, schedule=Once(type="once", at=datetime(2026, 1, 1, 9, 0)))
