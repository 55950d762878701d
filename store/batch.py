"""Group commit: writes issued together go to the store's thread as one call and commit as one transaction.

Every `Store.run` is a round trip to the store's thread (a queue, a thread wake-up, a hand-back to the
event loop, the GIL changing hands twice) and every write a commit of its own. Under load many writes
are issued at once: a getUpdates answer's inbounds, turns that finish together, replies delivered side
by side. `Store.write` sends a write at once when none is on the store's thread; the writes issued
while one is wait for it and then go together, as one call and one transaction, each write in a
savepoint of its own: one that raises is rolled back alone and only its caller sees the error. A
failure that ends the whole transaction (SQLite does that for a few errors) undoes the writes before it, which then
run again one by one; so a write function must do nothing but database work. A write is committed
before its caller resumes, as with `run`. Reads issued alongside (`Store.read`: the history a wave of
turns loads) join the same batch.

Only the SQLite store batches: residents sharing a PostgreSQL database claim rows from each other, and a
transaction holding many rows' locks would make them wait on (or deadlock with) each other's batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

Op = Callable[[Any], Any]
Outcome = tuple[bool, Any]  # (True, result) or (False, the exception)
_SAVEPOINT = "anyy_batch"


class Batcher:
    """Hands writes and reads to `run` (`Store.run`): the first at once, those issued while it is on the
    store's thread together, as the next batch."""

    def __init__(self, run: Callable[[Callable[[Any], list[Outcome]]], Awaitable[list[Outcome]]]) -> None:
        self._run = run
        self._queued: list[tuple[Op, bool, asyncio.Future[Any]]] = []
        self._busy: asyncio.AbstractEventLoop | None = None  # the loop whose call (or batch) is under way
        self._drainer: asyncio.Task[None] | None = None

    async def add(self, fn: Op, write: bool = True) -> Any:
        loop = asyncio.get_running_loop()
        if self._busy is loop:
            future: asyncio.Future[Any] = loop.create_future()
            self._queued.append((fn, write, future))
            return await future
        # Nothing under way (or only in a loop that has gone, whose callers are gone with it): go at
        # once, so a quiet process pays no wait and no task for the batching.
        self._busy, self._queued = loop, []
        try:
            [(ok, value)] = await self._run(lambda db: run_batch(db, [(fn, write)]))
        finally:
            if self._queued:  # issued meanwhile: they go as one batch
                self._drainer = loop.create_task(self._drain(), name="store-batch")
            else:
                self._busy = None
        if not ok:
            raise value
        return value

    async def _drain(self) -> None:
        try:
            while self._queued:
                # An op whose caller was cancelled before its batch left is not run (as with `run`).
                batch = [(fn, write, future) for fn, write, future in self._queued if not future.cancelled()]
                self._queued = []
                if not batch:
                    continue
                ops = [(fn, write) for fn, write, _ in batch]
                try:
                    outcomes = await self._run(partial(run_batch, ops=ops))
                except Exception as exc:  # e.g. the store was closed: every caller hears it
                    outcomes = [(False, exc)] * len(batch)
                for (_, _, future), (ok, value) in zip(batch, outcomes, strict=True):  # one outcome per op
                    if not future.done():
                        if ok:
                            future.set_result(value)
                        else:
                            future.set_exception(value)
        finally:
            self._busy = self._drainer = None


def run_batch(db: Any, ops: list[tuple[Op, bool]]) -> list[Outcome]:
    """On the store's thread: the ops (fn, is a write) in one transaction, each write in a savepoint (see
    the module)."""
    if len(ops) == 1:
        fn, write = ops[0]
        return [_alone(db, fn) if write else _call(db, fn)]
    outcomes: list[Outcome] = []
    db.execute("BEGIN")
    try:
        for index, (fn, write) in enumerate(ops):
            if write:
                db.execute(f"SAVEPOINT {_SAVEPOINT}")
            outcome = _call(db, fn)
            outcomes.append(outcome)
            if write and db.conn.in_transaction:
                if not outcome[0]:
                    db.execute(f"ROLLBACK TO {_SAVEPOINT}")
                db.execute(f"RELEASE {_SAVEPOINT}")
            if not db.conn.in_transaction:  # a failure ended the whole transaction: the ops before it too
                return [*(_alone(db, f) for f, _ in ops[:index]), outcome,
                        *(_alone(db, f) for f, _ in ops[index + 1:])]
        db.execute("COMMIT")
    except BaseException as exc:
        if db.conn.in_transaction:
            db.execute("ROLLBACK")
        if not isinstance(exc, Exception):
            raise
        return [(False, exc)] * len(ops)
    return outcomes


def _call(db: Any, fn: Op) -> Outcome:
    try:
        return True, fn(db)
    except Exception as exc:
        return False, exc


def _alone(db: Any, fn: Op) -> Outcome:
    """A write in a transaction of its own."""
    try:
        with db.atomic():
            return True, fn(db)
    except Exception as exc:
        return False, exc
