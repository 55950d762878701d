"""Issue 27: several residents on one PostgreSQL database behave like one (docs/scale.md).

Each test opens two or more `Store`s on one fresh database, each with its own owner — what two `anyy
run` processes are to each other, as far as every claim in the store is concerned — and races them.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg
import pytest

from gateway.config import parse_config
from gateway.turns.lanes import Lanes
from store import leases, pg_schema
from store.approvals import Approvals
from store.automations import Automations
from store.db import Store
from store.outbox import Outbox
from store.processes import Processes
from store.records import ApprovalRecord, Origin, Outbound, ProcessRecord, SubagentJob, iso, utcnow
from store.subagents import SubagentJobs
from tests.support.postgres import PW_PASSWORD, PW_USER, Backend
from tests.test_automations_store import record

ORIGIN = Origin(surface="telegram", chat_id="42")


@pytest.fixture
def backend(pg_cluster):  # these tests are about PostgreSQL only: every claim races another store
    db = pg_cluster.database()
    yield Backend("postgresql", pg_cluster.url(db), pg_cluster)
    pg_cluster.drop(db)


@pytest.fixture
async def pair(tmp_path, backend):
    a = await Store(tmp_path / "a.db", url=backend.url, owner=f"{leases.OWNER}/a").open()
    b = await Store(tmp_path / "b.db", url=backend.url, owner=f"{leases.OWNER}/b").open()
    yield a, b
    await a.close()
    await b.close()


async def test_residents_migrate_an_empty_database_at_once_and_a_password_comes_from_the_environment(
        tmp_path, pg_cluster, monkeypatch):
    name = pg_cluster.empty_database(owner=PW_USER)
    monkeypatch.setenv("ANYY_TEST_DB_PASSWORD", PW_PASSWORD)
    cfg = parse_config({"store": {"url": pg_cluster.url(name, user=PW_USER), "password_env": "ANYY_TEST_DB_PASSWORD"}},
                       "test")
    stores = [cfg.new_store(owner=f"{leases.OWNER}/{i}") for i in range(4)]
    await asyncio.gather(*(s.open() for s in stores))  # four starts, one migration
    try:
        applied = await stores[0].run(lambda db: db.execute("SELECT count(*) FROM anyy_migrations").fetchone()[0])
        assert applied == len(pg_schema.PG_MIGRATIONS)
        assert stores[0].where == pg_cluster.url(name, user=PW_USER)  # no password in what is shown
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    monkeypatch.delenv("ANYY_TEST_DB_PASSWORD")
    with pytest.raises(Exception, match="password"):
        await cfg.new_store().open()


async def test_outbox_rows_are_delivered_by_one_resident_each(pair):
    a, b = pair
    for i in range(40):
        await Outbox(a if i % 2 else b).enqueue(Outbound(origin=ORIGIN, text=f"reply {i}"), f"k{i}")
    claimed: dict[str, list[int]] = {"a": [], "b": []}
    first_claim = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def dispatcher(store: Store, name: str, other: str) -> None:
        box = Outbox(store)
        while rows := await box.due("telegram", limit=3):
            claimed[name] += [row.id for row in rows]
            first_claim[name].set()
            # Holding its first claim until the other resident has one makes both take part on a busy
            # machine too (one could otherwise drain all 40 before the other's first query).
            await asyncio.wait_for(first_claim[other].wait(), 30)
            for row in rows:
                await box.mark_sent(row.id, f"m{row.id}")

    await asyncio.gather(dispatcher(a, "a", "b"), dispatcher(b, "b", "a"))
    assert sorted(claimed["a"] + claimed["b"]) == sorted(set(claimed["a"] + claimed["b"]))  # none twice
    assert len(claimed["a"]) + len(claimed["b"]) == 40
    assert claimed["a"] and claimed["b"]  # both took part


async def test_a_claimed_outbox_row_is_taken_over_once_its_lease_lapses(pair):
    a, b = pair
    item = await Outbox(a).enqueue(Outbound(origin=ORIGIN, text="hi"), "k")
    assert [r.id for r in await Outbox(a).due("telegram")] == [item]
    assert await Outbox(b).due("telegram") == []  # a live resident is delivering it
    await a.run(lambda db: db.execute("UPDATE outbox SET lease_until = ?", [iso(utcnow() - timedelta(seconds=1))]))
    assert [r.id for r in await Outbox(b).due("telegram")] == [item]


async def test_a_session_lane_holds_across_residents(pair):
    a, b = pair
    lane_a, lane_b = Lanes(a), Lanes(b)
    order: list[str] = []
    inside = asyncio.Event()

    async def first() -> None:
        async with lane_a.hold("telegram:42"):
            order.append("a in")
            inside.set()
            await asyncio.sleep(0.3)
            order.append("a out")

    async def second() -> None:
        await inside.wait()
        async with lane_b.hold("telegram:42"):
            order.append("b in")

    await asyncio.gather(first(), second())
    assert order == ["a in", "a out", "b in"]
    async with lane_b.hold("telegram:other"), lane_a.hold("telegram:42"):  # other lanes are free
        pass


async def test_an_automation_run_is_left_to_its_live_owner_and_taken_over_when_it_stops(pair):
    a, b = pair
    await Automations(a).create(record(), "owner")
    run_id = await Automations(a).claim_run("a1", "2026-12-01T08:00:00.000000+00:00", next_run_at=None)
    assert run_id is not None
    assert await Automations(b).unfinished_runs() == []  # a is alive and renewing: never re-run
    await a.run(lambda db: db.execute("UPDATE automation_runs SET lease_until = ?",
                                      [iso(utcnow() - timedelta(seconds=1))]))
    assert [r.id for r in await Automations(b).unfinished_runs()] == [run_id]
    assert await Automations(a).unfinished_runs() == []  # b has it now


async def test_one_approval_per_call_and_room_for_one_helper_under_races(pair):
    a, b = pair
    now = iso(utcnow())

    def approval(approval_id: str) -> ApprovalRecord:
        return ApprovalRecord(id=approval_id, session_id="s", origin=ORIGIN, requester="telegram:1",
                              deciders=["telegram:1"], tool="send", tool_call_id="c1", turn_id="in-1",
                              args_json="{}", args_sha256="x", execution="confirm", preview="p", state="pending",
                              created_at=now, expires_at=now)

    prompt = Outbound(origin=ORIGIN, text="approve?")
    results = await asyncio.gather(*(Approvals(s).create(approval(f"ap{i}"), prompt)
                                     for i, s in enumerate([a, b, a, b])))
    assert sum(created for _, created in results) == 1
    assert len({rec.id for rec, _ in results}) == 1

    def job(job_id: str) -> SubagentJob:
        return SubagentJob(id=job_id, parent_session_id="s", child_session_id=f"sub:{job_id}", user_key="telegram:1",
                           origin=ORIGIN, task="t", created_at=now)

    made = await asyncio.gather(*(SubagentJobs(s).create_if_room(job(f"j{i}"), 1) for i, s in enumerate([a, b, a, b])))
    assert sorted(made) == [False, False, False, True]


async def test_start_up_marks_lost_only_processes_no_live_resident_supervises(pair, tmp_path):
    a, b = pair
    for store, pid in ((a, "pa"), (b, "pb")):
        await Processes(store).add(ProcessRecord(id=pid, session_id="s", user_key="u", command="sleep 9", cwd="/",
                                                 log_path=str(tmp_path / pid), started_at=iso(utcnow())))
    assert [r["id"] for r in await Processes(b).mark_lost()] == ["pb"]  # b restarted; a's stays running
    assert (await Processes(a).get("s", "pa")).state == "running"  # type: ignore[union-attr]


async def test_one_slot_claim_and_one_decision_when_two_residents_race(pair):
    a, b = pair
    await Automations(a).create(record(), "owner")
    slot = "2026-12-01T08:00:00.000000+00:00"
    claims = await asyncio.gather(*(Automations(s).claim_run("a1", slot, next_run_at=None) for s in [a, b, a, b]))
    assert len([c for c in claims if c is not None]) == 1  # the reminder fires once
    now = iso(utcnow())
    rec = ApprovalRecord(id="ap1", session_id="s", origin=ORIGIN, requester="telegram:1", deciders=["telegram:1"],
                         tool="send", tool_call_id="c1", turn_id="in-1", args_json="{}", args_sha256="x",
                         execution="confirm", preview="p", state="pending", created_at=now, expires_at=now)
    await Approvals(a).create(rec, Outbound(origin=ORIGIN, text="approve?"))
    presses = await asyncio.gather(*(Approvals(s).transition("ap1", ("pending",), "approved", "telegram:1")
                                     for s in [a, b]))  # the button pressed on both residents at once
    assert len([p for p in presses if p is not None]) == 1


async def test_a_dropped_database_connection_fails_one_call_and_the_next_reconnects(pair):
    a, b = pair
    pid = await a.run(lambda db: db.execute("SELECT pg_backend_pid()").fetchone()[0])
    await b.run(lambda db: db.execute("SELECT pg_terminate_backend(?)", [pid]))  # what a server restart does
    with pytest.raises(psycopg.OperationalError):
        await a.run(lambda db: db.execute("SELECT 1").fetchone())
    assert await a.run(lambda db: db.execute("SELECT 1").fetchone()[0]) == 1
