"""Group commit (`Store.write`, store/batch.py) on a real SQLite store: writes issued together share one
transaction, yet each succeeds or fails on its own, as if it had been written alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from store.db import Store


@pytest.fixture
async def db(tmp_path: Path) -> Any:
    async with Store(tmp_path / "batch.db") as store:
        await store.run(lambda d: d.executescript(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT UNIQUE);"
            # A trigger that ends the whole transaction, as a few SQLite errors do.
            "CREATE TABLE doomed (id INTEGER PRIMARY KEY);"
            "CREATE TRIGGER doom BEFORE INSERT ON doomed BEGIN SELECT RAISE(ROLLBACK, 'doomed'); END;"))
        yield store


def note(text: str) -> Any:
    return lambda d: d.execute("INSERT INTO notes (text) VALUES (?) RETURNING id", [text]).fetchone()[0]


async def notes(store: Store) -> list[str]:
    return await store.run(lambda d: [r[0] for r in d.execute("SELECT text FROM notes ORDER BY id")])


async def traced(store: Store) -> list[str]:
    statements: list[str] = []
    await store.run(lambda d: d.conn.set_trace_callback(statements.append))
    return statements


async def test_writes_issued_together_commit_once_and_each_gets_its_result(db: Store) -> None:
    statements = await traced(db)
    ids = await asyncio.gather(*(db.write(note(f"n{i}")) for i in range(5)))
    assert await notes(db) == [f"n{i}" for i in range(5)]
    assert ids == sorted(set(ids)) and len(ids) == 5  # each caller got its own row's id, in order
    # The first goes at once, alone; the four issued while it was on the store's thread, together.
    assert statements.count("BEGIN") == 2 and statements.count("COMMIT") == 2


async def test_a_write_that_fails_is_rolled_back_alone(db: Store) -> None:
    def half_then_fail(d: Any) -> None:
        d.execute("INSERT INTO notes (text) VALUES ('half')")
        raise ValueError("the write's own error")

    results = await asyncio.gather(db.write(note("first")), db.write(note("a")), db.write(half_then_fail),
                                   db.write(note("a")), db.write(note("b")), return_exceptions=True)
    assert isinstance(results[2], ValueError) and str(results[2]) == "the write's own error"
    assert "UNIQUE" in str(results[3])  # the database's own error, for that caller only
    assert all(isinstance(results[i], int) for i in (0, 1, 4))
    assert await notes(db) == ["first", "a", "b"]


async def test_a_failure_that_ends_the_transaction_does_not_lose_the_others(db: Store) -> None:
    doomed = db.write(lambda d: d.execute("INSERT INTO doomed DEFAULT VALUES"))
    results = await asyncio.gather(db.write(note("first")), db.write(note("before")), doomed,
                                   db.write(note("after")), return_exceptions=True)
    assert "doomed" in str(results[2])
    assert await notes(db) == ["first", "before", "after"]


async def test_a_write_cancelled_before_its_batch_left_is_not_run(db: Store) -> None:
    first = asyncio.ensure_future(db.write(note("kept")))
    cancelled = asyncio.ensure_future(db.write(note("cancelled")))
    await asyncio.sleep(0)  # the first is on the store's thread, the second waits for it
    cancelled.cancel()
    await first
    assert await notes(db) == ["kept"]


async def test_writes_issued_while_a_batch_is_on_the_store_thread_form_the_next(db: Store) -> None:
    statements = await traced(db)
    started, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow(d: Any) -> None:  # holds the store's thread until the test lets it go
        loop.call_soon_threadsafe(started.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
        d.execute("INSERT INTO notes (text) VALUES ('slow')")

    first = asyncio.ensure_future(db.write(slow))
    await started.wait()
    later = [asyncio.ensure_future(db.write(note(f"later{i}"))) for i in range(3)]
    await asyncio.sleep(0)  # the later writes are queued: they wait for the batch under way
    release.set()
    await asyncio.gather(first, *later)
    assert await notes(db) == ["slow", "later0", "later1", "later2"]
    assert statements.count("COMMIT") == 2  # the first batch, then the three together


async def test_a_read_issued_with_writes_joins_their_batch_and_sees_the_writes_before_it(db: Store) -> None:
    statements = await traced(db)
    count = lambda d: d.execute("SELECT count(*) FROM notes").fetchone()[0]  # noqa: E731
    results = await asyncio.gather(db.write(note("x")), db.read(count), db.write(note("y")), db.read(count))
    assert results[1] == 1 and results[3] == 2
    assert statements.count("BEGIN") == 2  # the first write alone, then the other three in one transaction


async def test_a_write_alone_goes_at_once_in_its_own_transaction(db: Store) -> None:
    statements = await traced(db)
    await db.write(note("one"))
    assert await db.read(lambda d: d.execute("SELECT count(*) FROM notes").fetchone()[0]) == 1
    assert statements[-4:-1] == ["BEGIN", "INSERT INTO notes (text) VALUES ('one') RETURNING id", "COMMIT"]
    assert statements[-1].startswith("SELECT")  # a read alone: no transaction around it


def test_a_store_outlives_an_event_loop_closed_mid_batch(tmp_path: Path) -> None:
    """A loop closed while a write and the one queued behind it are pending (their tasks never finish)
    leaves nothing stuck: the next loop's writes go through."""
    import threading

    store = Store(tmp_path / "loops.db")
    hold = threading.Event()
    stranded: list[asyncio.Future[Any]] = []  # the two writes the closed loop leaves pending

    async def first() -> None:
        await store.open()
        await store.run(lambda d: d.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT UNIQUE)"))
        stranded.append(asyncio.ensure_future(store.write(lambda d: hold.wait(10))))  # holds the store's thread
        stranded.append(asyncio.ensure_future(store.write(note("queued behind it"))))
        await asyncio.sleep(0)  # both issued

    async def second() -> list[str]:
        hold.set()
        await asyncio.wait_for(store.write(note("after")), 5)
        return await notes(store)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(first())
    loop.close()  # abruptly: the pending tasks are dropped, not cancelled
    try:
        assert "after" in asyncio.run(second())
    finally:
        asyncio.run(store.close())
