"""Automation rows: one claim per slot, the schedule moves on, changes are audited."""

import asyncio

import pytest

from store.audit import Audit
from store.automations import Automations
from store.records import AutomationRecord, Origin, iso, utcnow

pytestmark = pytest.mark.both_backends

ORIGIN = Origin(surface="telegram", chat_id="42")


def record(automation_id: str = "a1", user_key: str = "telegram:1",
           next_run_at: str = "2026-12-01T08:00:00.000000+00:00") -> AutomationRecord:
    now = iso(utcnow())
    return AutomationRecord(id=automation_id, user_key=user_key, origin=ORIGIN, name="call mum",
                            schedule={"type": "once", "at": "2026-12-01T09:00:00", "timezone": "Europe/Berlin"},
                            action={"kind": "reminder", "text": "call mum"}, created_at=now, updated_at=now,
                            next_run_at=next_run_at)


async def test_two_claims_on_one_slot_make_one_run(store):
    repo = Automations(store)
    await repo.create(record(), actor="telegram:1")
    slot = "2026-12-01T08:00:00.000000+00:00"
    claims = await asyncio.gather(*[repo.claim_run("a1", slot, next_run_at=None) for _ in range(10)])
    assert sum(c is not None for c in claims) == 1
    again = await repo.claim_run("a1", slot, next_run_at=None)
    assert again is None
    runs = await repo.history("a1")
    assert [(r.scheduled_for, r.status) for r in runs] == [(slot, "claimed")]
    rec = await repo.get("a1")
    assert rec is not None and rec.last_run_at == slot and rec.next_run_at is None


async def test_a_refused_claim_still_moves_the_schedule_on(store):
    repo = Automations(store)
    await repo.create(record(), actor="telegram:1")
    slot = "2026-12-01T08:00:00.000000+00:00"
    first = await repo.claim_run("a1", slot, late=True, next_run_at="2026-12-02T08:00:00.000000+00:00")
    assert first is not None
    await repo.update("a1", "telegram:1", next_run_at=slot)  # as if the advance had been lost
    assert await repo.claim_run("a1", slot, next_run_at="2026-12-02T08:00:00.000000+00:00") is None
    rec = await repo.get("a1")
    assert rec is not None and rec.next_run_at == "2026-12-02T08:00:00.000000+00:00"
    run = await repo.get_run(first)
    assert run is not None and run.late


async def test_no_claim_for_a_disabled_or_deleted_automation(store):
    repo = Automations(store)
    await repo.create(record("a1"), actor="telegram:1")
    await repo.create(record("a2"), actor="telegram:1")
    await repo.update("a1", "telegram:1", enabled=False)
    await repo.delete("a2", "admin")
    slot = "2026-12-01T08:00:00.000000+00:00"
    assert await repo.claim_run("a1", slot, next_run_at=None) is None
    assert await repo.claim_run("a2", slot, next_run_at=None) is None
    assert await repo.history("a1") == [] and await repo.get("a2") is None


async def test_finished_runs_leave_the_unfinished_list_and_deletion_takes_the_log(store):
    repo = Automations(store)
    await repo.create(record(), actor="telegram:1")
    one = await repo.claim_run("a1", "2026-12-01T08:00:00.000000+00:00", next_run_at=None)
    two = await repo.claim_run("a1", "2026-12-02T08:00:00.000000+00:00", next_run_at=None)
    assert one is not None and two is not None
    await repo.finish_run(one, "delivered", "⏰ call mum")
    assert [r.id for r in await repo.unfinished_runs()] == [two]
    assert [r.id for r in await repo.history("a1", limit=1)] == [two]  # newest first
    await repo.delete("a1", "telegram:1")
    assert await repo.history("a1") == [] and await repo.unfinished_runs() == []


async def test_changes_are_audited_with_their_actor(store):
    repo = Automations(store)
    await repo.create(record(), actor="telegram:1")
    await repo.update("a1", "telegram:1", name="call mum and dad")
    await repo.delete("a1", "admin")
    events = [(e.actor, e.action, e.subject) for e in await Audit(store).list()]
    assert events == [("telegram:1", "automation.create", "a1"), ("telegram:1", "automation.update", "a1"),
                      ("admin", "automation.delete", "a1")]


async def test_lists_are_per_user_and_soonest_first(store):
    repo = Automations(store)
    await repo.create(record("late", next_run_at="2026-12-03T08:00:00.000000+00:00"), actor="telegram:1")
    await repo.create(record("soon", next_run_at="2026-12-02T08:00:00.000000+00:00"), actor="telegram:1")
    await repo.create(record("other", user_key="slack:U2"), actor="slack:U2")
    assert [r.id for r in await repo.list("telegram:1")] == ["soon", "late"]
    assert {r.id for r in await repo.list(None)} == {"soon", "late", "other"}
    await repo.update("other", "slack:U2", enabled=False)
    assert sorted(await repo.scheduled_slots()) == [("late", "2026-12-03T08:00:00.000000+00:00"),
                                                    ("soon", "2026-12-02T08:00:00.000000+00:00")]
