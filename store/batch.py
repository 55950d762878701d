"""Group commit: writes issued together go to the store's thread as one call and commit as one transaction.

Every `Store.run` is a round trip to the store's thread (a queue, a thread wake-up, a hand-back to the
event loop, the GIL changing hands twice) and every write a commit of its own. Under load many writes
are issued at once: a getUpdates answer's inbounds, turns that finish together, replies delivered side
by side. `Store.write` queues a write; the writes queued in one turn of the event loop, or while the
previous batch is on the store's thread, go as one call and one transaction, each write in a savepoint
of its own: one that raises is rolled back alone and only its caller sees the error. A failure that
ends the whole transaction (SQLite does that for a few errors) undoes the writes before it, which then
run again one by one; so a write function must do nothing but database work. A write is committed
before its caller resumes, as with `run`. Reads issued alongside (`Store.read`: the history a wave of
turns loads) join the same batch.

Only the SQLite store batches: residents sharing a PostgreSQL database claim rows from each other, and a
transaction holding many rows' locks would make them wait on (or deadlock with) each other's batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Write = Callable[[Any], Any]
Outcome = tuple[bool, Any]  # (True, result) or (False, the exception)


class Batcher:
    """Collects writes (and reads: `Store.read`) and hands them to `run` (`Store.run`) a batch at a time."""

    def __init__(self, run: Callable[[Callable[[Any], list[Outcome]]], Awaitable[list[Outcome]]]) -> None:
        self._run = run
        self._queued: list[tuple[Write, asyncio.Future[Any]]] = []
        self._draining = False

    async def add(self, fn: Write) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((fn, future))
        if not self._draining:  # the task starts next loop turn: writes issued meanwhile join the batch
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain(), name="store-batch")
        return await future

    async def _drain(self) -> None:
        try:
            while self._queued:
                # A write whose caller was cancelled before its batch left is not run (as with `run`).
                batch = [(fn, future) for fn, future in self._queued if not future.cancelled()]
                self._queued = []
                if not batch:
                    continue
                fns = [fn for fn, _ in batch]
                try:
                    outcomes = await self._run(lambda db: run_batch(db, fns))
                except Exception as exc:  # e.g. the store was closed: every caller hears it
                    outcomes = [(False, exc)] * len(batch)
                for (_, future), (ok, value) in zip(batch, outcomes):
                    if not future.done():
                        if ok:
                            future.set_result(value)
                        else:
                            future.set_exception(value)
        finally:
            self._draining = False


def run_batch(db: Any, fns: list[Write]) -> list[Outcome]:
    """On the store's thread: every write in one transaction, each in a savepoint (see the module)."""
    if len(fns) == 1:
        return [_alone(db, fns[0])]
    outcomes: list[Outcome] = []
    db.execute("BEGIN")
    try:
        for index, fn in enumerate(fns):
            try:
                with db.atomic():  # a savepoint: inside the transaction opened above
                    outcomes.append((True, fn(db)))
            except Exception as exc:
                outcomes.append((False, exc))
                if not db.conn.in_transaction:  # the whole transaction is gone: the writes before it too
                    return [*(_alone(db, f) for f in fns[:index]), outcomes[index],
                            *(_alone(db, f) for f in fns[index + 1:])]
        db.execute("COMMIT")
    except BaseException as exc:
        if db.conn.in_transaction:
            db.execute("ROLLBACK")
        if not isinstance(exc, Exception):
            raise
        return [(False, exc)] * len(fns)
    return outcomes


def _alone(db: Any, fn: Write) -> Outcome:
    try:
        with db.atomic():
            return True, fn(db)
    except Exception as exc:
        return False, exc
