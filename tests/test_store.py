import asyncio

import pytest

from store.approvals import Approvals
from store.db import Store
from store.inbound import InboundLog
from store.memory import Memory
from store.messages import Messages, fts_quote
from store.migrations import MIGRATIONS
from store.outbox import Outbox
from store.records import ApprovalRecord, Inbound, MessageRecord, Origin, Outbound, iso, utcnow
from store.sessions import Sessions
from store.tasks import Tasks

pytestmark = pytest.mark.both_backends


async def test_migrations_apply_twice(tmp_path):
    path = tmp_path / "a.db"
    async with Store(path) as s:
        await Sessions(s).get_or_create("s1", Origin(surface="console", chat_id="c"), "console:me")
    async with Store(path) as s:  # second open applies nothing and keeps data
        assert (await Sessions(s).get("s1")) is not None
        applied = await s.run(lambda db: db.execute("select count(*) from _sqlite_migrations").fetchone()[0])
        assert applied == len(MIGRATIONS._migrations)


async def test_fts_search_is_per_user_and_quotes_input(store):
    await Sessions(store).get_or_create("s1", Origin(surface="console", chat_id="c"), "console:a")
    m = Messages(store)
    await m.add(MessageRecord(session_id="s1", turn_id="t", role="user", content="dentist on Friday",
                              user_key="console:a"))
    await m.add(MessageRecord(session_id="s1", turn_id="t", role="user", content="dentist secret",
                              user_key="console:b"))
    hits = await m.search("console:a", 'dentist" OR *')
    assert hits == []  # the quote and operator are literal text, not syntax
    hits = await m.search("console:a", "dentist")
    assert [h.snippet for h in hits] == ["[dentist] on Friday"]
    assert fts_quote('a "b"') == '"a" """b"""'


async def test_inbound_redelivery_is_a_noop(store):
    log = InboundLog(store)
    msg = Inbound(surface="telegram", chat_id="1", user_id="2", text="hi")
    first = await log.accept(msg, "telegram:update:5")
    second = await log.accept(msg, "telegram:update:5")
    assert first is not None and second is None
    assert await log.take_over() == []  # this process's own, running here
    await store.run(lambda db: db.execute("UPDATE inbound_queue SET owner = 'elsewhere/1/1', lease_until = ?",
                                          [iso(utcnow())]))  # another host's, its lease lapsed
    assert [i for i, _ in await log.take_over()] == [first]
    assert await log.take_over() == []  # now ours
    await log.done(first)
    await store.run(lambda db: db.execute("UPDATE inbound_queue SET owner = NULL"))
    assert await log.take_over() == []  # done: nothing to take


async def test_outbox_dedupe_key_enqueues_once(store):
    box = Outbox(store)
    out = Outbound(origin=Origin(surface="console", chat_id="c"), text="hello")
    a = await box.enqueue(out, dedupe_key="k1")
    b = await box.enqueue(out, dedupe_key="k1")
    assert a == b
    assert [i.id for i in await box.due("console")] == [a]


async def test_approval_decided_once_under_concurrency(store):
    appr = Approvals(store)
    now = iso(utcnow())
    await appr.create(ApprovalRecord(
        id="ap1", session_id="s", origin=Origin(surface="console", chat_id="c"), requester="console:me",
        deciders=["console:me"], tool="t", tool_call_id="c1", args_json="{}", args_sha256="x", execution="confirm",
        preview="p", state="pending", created_at=now, expires_at=now),
        Outbound(origin=Origin(surface="console", chat_id="c"), text="approve?"))
    results = await asyncio.gather(*[appr.transition("ap1", ("pending",), "approved", "console:me") for _ in range(10)])
    assert sum(r is not None for r in results) == 1


async def test_tasks_and_memory_of_every_user_for_the_dashboard(store):
    await Tasks(store).create("telegram:1", "milk")
    await Tasks(store).create("slack:U2", "bread")
    await Memory(store).add("telegram:1", "user", "likes tea")
    assert sorted(t.title for t in await Tasks(store).list(None)) == ["bread", "milk"]
    assert [m.content for m in await Memory(store).list(None)] == ["likes tea"]
