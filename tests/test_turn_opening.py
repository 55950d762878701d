"""A turn opens with one store round trip (issue 25): the session got or created, its history window read
(topped up, or whole after a new summary), the turn's message written and the memory read, together.
The selection's record goes with the turn's next write. The real Gateway through the console surface,
the fake model, round trips counted on the real Store (tests/support/trips.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway import checkpoints
from gateway.turns.window_cache import HistoryWindows
from store.db import Store
from store.messages import Messages
from store.records import MessageRecord, Origin
from store.sessions import Sessions
from tests.fixtures.model import reply, tool_call
from tests.support.trips import Trips
from tests.test_turn_transactions import transactions

SID = "console:local"


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Trips:
    counted = Trips()
    counted.install(monkeypatch)
    return counted


async def say_counting(h: Any, trips: Trips, text: str) -> list[int]:
    """Say `text`; the round trips the turn had made when it called the model (one entry per call)."""
    before_call: list[int] = []

    async def count() -> None:
        before_call.append(trips.of(asyncio.current_task()))

    with checkpoints.intercept("model.before_call", count):
        await h.say(text)
    return before_call


def opening(h: Any) -> list[int]:
    """The trips a turn makes before its model call: its opening (after its chat's lane, on a shared
    store a claimed row)."""
    return [2 if h.gw.store.shared else 1]


@pytest.mark.both_backends
async def test_a_plain_turn_opens_with_one_round_trip(trips, start_console, model):
    h = await start_console()
    assert await say_counting(h, trips, "hello") == opening(h)  # the session created in it
    assert await say_counting(h, trips, "and again") == opening(h)  # the cached window topped up in it
    sent = model.requests[-1].said
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "hello"), ("assistant", "echo: hello"), ("user", "and again")]
    roles = [m.role for m in await Messages(h.gw.store).recent(SID, 0, 50)]
    assert roles == ["user", "assistant", "user", "assistant"]  # each message once


@pytest.mark.both_backends
async def test_after_a_new_summary_the_window_is_read_whole_in_the_same_trip(trips, start_console, model):
    h = await start_console()
    await h.say("my island is zanzibar")
    rows = await Messages(h.gw.store).recent(SID, 0, 50)
    await Messages(h.gw.store).add(MessageRecord(  # what compaction writes, as another process would
        session_id=SID, turn_id=f"summary-{rows[-1].id}", role="summary", content="SUMMARY: island zanzibar",
        meta={"covers_to_id": rows[-1].id}))
    assert await say_counting(h, trips, "which island?") == opening(h)
    sent = model.requests[-1].said
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "[summary of the earlier conversation, for context] SUMMARY: island zanzibar"),
        ("user", "which island?")]


@pytest.mark.both_backends
async def test_after_new_the_next_turn_reads_the_new_epoch_in_its_one_trip(trips, start_console, model):
    h = await start_console()
    await h.say("before")
    assert "Started a fresh conversation" in await h.say("/new")  # a command gets its session first
    assert await say_counting(h, trips, "after") == opening(h)
    assert [(m["role"], m["content"]) for m in model.requests[-1].said[1:]] == [("user", "after")]
    rows = await Messages(h.gw.store).recent(SID, 1, 50)
    assert [(m.epoch, m.role, m.content) for m in rows] == [(1, "user", "after"), (1, "assistant", "echo: after")]


async def test_the_selection_goes_with_the_turns_next_write(start_console, model):
    h = await start_console()
    statements: list[str] = []
    await h.gw.store.run(lambda db: db.conn.set_trace_callback(statements.append))
    await h.say("hello")  # chit-chat: no toolset
    session = await Sessions(h.gw.store).get(SID)
    assert session is not None and session.last_selection["names"] == []
    [end] = [t for t in transactions(statements) if any("SET last_selection" in s for s in t)]
    assert any("SET state = 'done'" in s for s in end)  # with the reply
    assert any(s.startswith("INSERT INTO messages") and "'assistant'" in s for s in end)

    statements.clear()
    model.script(tool_call("task_create", {"title": "milk"}), reply("Added."))
    await h.say("add a task: milk")
    session = await Sessions(h.gw.store).get(SID)
    assert session is not None and "tasks" in session.last_selection["names"]
    [step] = [t for t in transactions(statements) if any("SET last_selection" in s for s in t)]
    assert any(s.startswith("INSERT INTO messages") and "task_create" in s for s in step)  # the call's message
    assert not any(s.startswith("INSERT INTO messages") and "'user'" in s for s in step)
    assert "• tasks: keyword" in await h.say("/toolsets")  # what the last turn selected


async def test_two_loads_of_one_session_at_once_count_its_window_once(tmp_path):
    async with Store(tmp_path / "anyy.db") as store:
        await Sessions(store).get_or_create(SID, Origin(surface="console", chat_id="local"), "console:owner")
        messages = Messages(store)
        for i in range(3):
            await messages.add(MessageRecord(session_id=SID, turn_id=f"t{i}", role="user", content=f"m{i}"))
        windows = HistoryWindows(messages, 48_000)
        first, second = await asyncio.gather(windows.load(SID, 0), windows.load(SID, 0))
        assert [m.content for m in first] == [m.content for m in second] == ["m0", "m1", "m2"]
        alone = HistoryWindows(messages, 48_000)
        await alone.load(SID, 0)
        assert windows.cached_bytes == alone.cached_bytes
