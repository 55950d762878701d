"""Recorded trigger events and finished automation runs are not kept forever (gateway.retention): past 30
days an event goes, unless a run it started is still unfinished (the next start delivers that run and
needs the event); past 90 days a finished run goes, a claimed one never; the gateway sweeps at start."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gateway.retention import AUTOMATION_RUNS_KEPT, TRIGGER_EVENTS_KEPT
from store.automations import Automations
from store.db import Store
from store.records import AutomationRecord, Origin, iso, utcnow
from store.triggers import TriggerEvent, TriggerEvents, event_slot

LATER = utcnow() + TRIGGER_EVENTS_KEPT + timedelta(days=1)


async def _automation(store: Store) -> str:
    now = iso(utcnow())
    rec = AutomationRecord(id="a1", user_key="console:owner", origin=Origin(surface="console", chat_id="local"),
                           name="bank", schedule={"type": "webhook"}, action={"kind": "reminder"},
                           created_at=now, updated_at=now)
    await Automations(store).create(rec, "console:owner")
    return rec.id


async def _fired(store: Store, automation_id: str, key: str) -> tuple[TriggerEvent, int]:
    event = await TriggerEvents(store).record(TriggerEvent(key=key, kind="webhook", source="hook", text="body"))
    run_id = await Automations(store).claim_run(automation_id, event_slot(event), next_run_at=None)
    assert run_id is not None
    return event, run_id


@pytest.mark.both_backends
async def test_old_events_go_unless_their_run_is_unfinished(store: Store) -> None:
    events, runs = TriggerEvents(store), Automations(store)
    automation = await _automation(store)
    _, delivered = await _fired(store, automation, "hook:a1:delivered")
    _, pending = await _fired(store, automation, "hook:a1:pending")
    await events.record(TriggerEvent(key="hook:a1:unclaimed", kind="webhook", source="hook"))
    await runs.finish_run(delivered, "delivered", "ok")

    assert await events.prune(TRIGGER_EVENTS_KEPT) == 0  # all recorded just now
    assert await events.prune(TRIGGER_EVENTS_KEPT, now=LATER) == 2
    assert await events.get("hook:a1:delivered") is None and await events.get("hook:a1:unclaimed") is None
    assert await events.get("hook:a1:pending") is not None  # its run is still to be delivered

    await runs.finish_run(pending, "failed", "gave up")
    assert await events.prune(TRIGGER_EVENTS_KEPT, now=LATER) == 1
    assert await events.get("hook:a1:pending") is None


async def test_the_gateway_sweeps_old_trigger_events_at_start(start_console: Any) -> None:
    console = await start_console()
    store = console.gw.store
    automation = await _automation(store)
    _, run_id = await _fired(store, automation, "hook:a1:old")
    await Automations(store).finish_run(run_id, "delivered", "ok")
    await TriggerEvents(store).record(TriggerEvent(key="hook:a1:new", kind="webhook", source="hook"))
    await store.run(lambda db: db.execute("UPDATE trigger_events SET recorded_at = ? WHERE key = 'hook:a1:old'",
                                          [iso(utcnow() - TRIGGER_EVENTS_KEPT - timedelta(hours=1))]))
    await console.gw.stop()
    again = await start_console()
    assert await TriggerEvents(again.gw.store).get("hook:a1:old") is None
    assert await TriggerEvents(again.gw.store).get("hook:a1:new") is not None


@pytest.mark.both_backends
async def test_finished_runs_go_after_ninety_days_and_claimed_ones_stay(store: Store) -> None:
    runs = Automations(store)
    automation = await _automation(store)
    _, delivered = await _fired(store, automation, "hook:a1:delivered")
    _, failed = await _fired(store, automation, "hook:a1:failed")
    _, claimed = await _fired(store, automation, "hook:a1:claimed")
    await runs.finish_run(delivered, "delivered", "ok")
    await runs.finish_run(failed, "failed", "no")
    assert await runs.prune_runs(AUTOMATION_RUNS_KEPT) == 0  # all started just now
    later = utcnow() + AUTOMATION_RUNS_KEPT + timedelta(days=1)
    assert await runs.prune_runs(AUTOMATION_RUNS_KEPT, now=later) == 2
    assert [r.id for r in await runs.history(automation)] == [claimed]  # its delivery is still owed
