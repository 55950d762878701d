"""The cache of history windows is bounded in bytes: filled past its bound it evicts the least recently
used sessions, its estimate of what it holds is not far below what it really holds, and an evicted
session is read again from the store, unchanged."""

import gc
import tracemalloc

import pytest

from gateway.turns.window_cache import HistoryWindows
from store.messages import Messages
from store.records import MessageRecord, Origin
from store.sessions import Sessions

pytestmark = pytest.mark.both_backends

REPLY = "here is a reasonably detailed answer sentence. " * 8  # ~400 characters, a typical reply


async def fill(messages: Messages, session_id: str, turns: int, start: int = 0) -> None:
    origin = Origin(surface="console", chat_id=session_id)
    await Sessions(messages.store).get_or_create(session_id, origin, "console:me")
    rows = []
    for i in range(start, start + turns):
        rows.append(MessageRecord(session_id=session_id, turn_id=f"t{i}", role="user", content=f"question {i}?"))
        rows.append(MessageRecord(session_id=session_id, turn_id=f"t{i}", role="assistant", content=f"{i}: {REPLY}"))
    await messages.add_many(rows)


def texts(rows: list[MessageRecord]) -> list[tuple[str, str]]:
    return [(m.turn_id, m.content) for m in rows]


async def test_the_cache_stays_within_its_bytes_and_evicts_the_oldest_sessions(store):
    messages = Messages(store)
    sessions = [f"console:s{i}" for i in range(30)]
    for sid in sessions:
        await fill(messages, sid, 40)
    windows = HistoryWindows(messages, budget_chars=48_000, max_bytes=1_000_000)
    for sid in sessions:
        rows = await windows.load(sid, 0)
        assert len(rows) == 80  # each window is whole: 40 turns fit the budget
        assert windows.cached_bytes <= windows.max_bytes
    assert not windows.cached(sessions[0])  # the least recently used went first
    assert windows.cached(sessions[-1])
    kept = [sid for sid in sessions if windows.cached(sid)]
    assert 3 <= len(kept) < len(sessions)
    assert kept == sessions[-len(kept):]  # exactly the most recent ones


async def test_an_evicted_session_is_read_again_from_the_store(store):
    messages = Messages(store)
    await fill(messages, "console:a", 30)
    await fill(messages, "console:b", 30)
    windows = HistoryWindows(messages, budget_chars=48_000, max_bytes=1)  # room for one window only
    first = await windows.load("console:a", 0)
    await windows.load("console:b", 0)
    assert not windows.cached("console:a")
    await fill(messages, "console:a", 2, start=30)  # written while it was out of the cache
    again = await windows.load("console:a", 0)
    assert texts(again) == texts(first) + [(f"t{i}", c) for i in (30, 31) for c in (f"question {i}?", f"{i}: {REPLY}")]
    fresh = await HistoryWindows(messages, budget_chars=48_000).load("console:a", 0)
    assert texts(again) == texts(fresh)


async def test_a_long_session_keeps_its_window_and_its_bytes_to_the_budget(store):
    messages = Messages(store)
    windows = HistoryWindows(messages, budget_chars=10_000)
    for start in range(0, 200, 20):  # topped up turn after turn, far past the budget
        await fill(messages, "console:long", 20, start)
        rows = await windows.load("console:long", 0)
    assert rows[-1].content.startswith("199: ")
    assert sum(len(m.content) + 20 for m in rows) <= 10_000
    assert windows.dropped("console:long")  # compaction has work
    fresh = HistoryWindows(messages, budget_chars=10_000)
    assert texts(await fresh.load("console:long", 0)) == texts(rows)
    assert windows.cached_bytes == fresh.cached_bytes  # the running total did not drift


async def test_the_estimate_is_close_to_what_the_cache_really_holds(store):
    messages = Messages(store)
    for i in range(20):
        await fill(messages, f"console:m{i}", 40)
    windows = HistoryWindows(messages, budget_chars=48_000, max_bytes=10**9)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(20):
        rows = await windows.load(f"console:m{i}", 0)
        windows.view(f"console:m{i}", rows)  # the converted chat messages are cached too
    del rows
    gc.collect()
    held = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    assert 0.75 * windows.cached_bytes <= held <= 1.25 * windows.cached_bytes, (held, windows.cached_bytes)
