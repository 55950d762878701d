"""The outbox: every message the assistant sends is a row first, delivered by the surface's dispatcher.

A crash between writing and delivering leaves a pending row that the next start delivers; the
`dedupe_key` makes enqueueing idempotent (an automation run or an approval outcome enqueued twice is
still one message).
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlite_utils import Database

from store.db import Store
from store.records import Outbound, OutboxItem, iso, row_to, utcnow


def _item(row: dict) -> OutboxItem:
    data = dict(row)
    data["outbound"] = Outbound.model_validate_json(data.pop("payload"))
    for k in ("surface", "chat_id", "thread_id"):
        data.pop(k, None)
    return row_to(OutboxItem, data)


class Backlog(BaseModel):
    """Undelivered messages of one surface."""

    surface: str
    pending: int
    retrying: int  # pending rows that failed at least once
    failed: int
    oldest_pending_at: str | None = None


class Outbox:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def enqueue(self, outbound: Outbound, dedupe_key: str | None = None) -> int:
        """Add a message; with a dedupe key seen before, returns the existing row's id instead."""
        return await self.store.run(lambda db: add_outbound(db, outbound, dedupe_key))

    async def get(self, item_id: int) -> OutboxItem | None:
        def op(db: Database) -> OutboxItem | None:
            rows = db.execute_returning_dicts("SELECT * FROM outbox WHERE id = ?", [item_id])
            return _item(rows[0]) if rows else None

        return await self.store.run(op)

    async def due(self, surface: str, limit: int = 50) -> list[OutboxItem]:
        """Pending rows for `surface` whose retry time has come, oldest first."""

        def op(db: Database) -> list[OutboxItem]:
            rows = db.execute_returning_dicts(
                "SELECT * FROM outbox WHERE state = 'pending' AND surface = ?"
                " AND (next_attempt_at IS NULL OR next_attempt_at <= ?) ORDER BY id LIMIT ?",
                [surface, iso(utcnow()), limit],
            )
            return [_item(r) for r in rows]

        return await self.store.run(op)

    async def mark_sent(self, item_id: int, platform_message_id: str | None) -> None:
        await self.store.run(lambda db: db.execute(
            "UPDATE outbox SET state = 'sent', platform_message_id = ?, sent_at = ?, error = NULL WHERE id = ?",
            [platform_message_id, iso(utcnow()), item_id]))

    async def mark_retry(self, item_id: int, error: str, next_attempt_at: str) -> None:
        await self.store.run(lambda db: db.execute(
            "UPDATE outbox SET attempts = attempts + 1, error = ?, next_attempt_at = ? WHERE id = ?",
            [error, next_attempt_at, item_id]))

    async def mark_failed(self, item_id: int, error: str) -> None:
        await self.store.run(lambda db: db.execute(
            "UPDATE outbox SET state = 'failed', attempts = attempts + 1, error = ? WHERE id = ?", [error, item_id]))

    async def backlog(self) -> list[Backlog]:
        """Per surface: pending (and retrying) rows, rows given up on, the oldest pending one."""
        return await self.store.run(lambda db: [Backlog.model_validate(r) for r in db.execute_returning_dicts(
            "SELECT surface, sum(state = 'pending') AS pending, sum(state = 'pending' AND attempts > 0) AS retrying,"
            " sum(state = 'failed') AS failed,"
            " min(CASE WHEN state = 'pending' THEN created_at END) AS oldest_pending_at"
            " FROM outbox WHERE state != 'sent' GROUP BY surface ORDER BY surface")])


def add_outbound(db: Database, outbound: Outbound, dedupe_key: str | None = None) -> int:
    """`Outbox.enqueue` on the store thread, for a caller that writes the row in its own transaction
    (an approval and its prompt). The caller wakes the dispatcher afterwards."""
    cur = db.execute(
        "INSERT OR IGNORE INTO outbox (dedupe_key, surface, chat_id, thread_id, payload, state, created_at)"
        " VALUES (?, ?, ?, ?, ?, 'pending', ?)",
        [dedupe_key, outbound.origin.surface, outbound.origin.chat_id, outbound.origin.thread_id,
         outbound.model_dump_json(), iso(utcnow())],
    )
    if cur.rowcount:
        return int(cur.lastrowid or 0)
    return int(db.execute("SELECT id FROM outbox WHERE dedupe_key = ?", [dedupe_key]).fetchone()[0])
