"""The outbox: every message the assistant sends is a row first, delivered by the surface's dispatcher.

A crash between writing and delivering leaves a pending row that the next start delivers; the
`dedupe_key` makes enqueueing idempotent (an automation run or an approval outcome enqueued twice is
still one message).

A reply that streams is one row rewritten as its text grows (`put`): a row already delivered becomes
pending again and is delivered as an edit of its own platform message, so the row always knows the message
it is editing, and a turn re-run after a crash, writing under the same key, edits that message instead of
sending a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from store.db import Store
from store.leases import lease_until
from store.records import Outbound, OutboxItem, iso, row_to, utcnow
from store.tables import Database

_INSERT = ("INSERT INTO outbox (dedupe_key, surface, chat_id, thread_id, payload, state, created_at)"
           " VALUES (?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT DO NOTHING RETURNING id")
_CLEAR = "sending_at = NULL, owner = NULL, lease_until = NULL"  # an outcome recorded ends the claim


def _item(row: dict) -> OutboxItem:
    data = dict(row)
    data["outbound"] = Outbound.model_validate_json(data.pop("payload"))
    for k in ("surface", "chat_id", "thread_id", "owner", "lease_until"):
        data.pop(k, None)
    return row_to(OutboxItem, data)


class Backlog(BaseModel):
    """Undelivered messages of one surface."""

    surface: str
    pending: int
    retrying: int  # pending rows that failed at least once
    failed: int
    oldest_pending_at: str | None = None


@dataclass
class Due:
    """What `Outbox.due_except` found: the rows to hand over, how many rows it read in all (rows still
    in lanes included), and the ids it marked as being sent."""

    items: list[OutboxItem]
    read: int
    sending: set[int] = field(default_factory=set)


class Outbox:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def enqueue(self, outbound: Outbound, dedupe_key: str | None = None) -> int:
        """Add a message; with a dedupe key seen before, returns the existing row's id instead."""
        return await self.store.run(lambda db: add_outbound(db, outbound, dedupe_key))

    async def put(self, outbound: Outbound, dedupe_key: str, along: Callable[[Any], None] | None = None) -> int:
        """Make `outbound` the content of the row for `dedupe_key` (`put_outbound`). `along(db)` runs in
        the same transaction, first: what the reply records besides itself (the answer it carries, its
        inbound marked done), so a turn's end costs one round trip and is all or nothing."""

        def op(db: Database) -> int:
            if along is not None:
                along(db)
            return put_outbound(db, outbound, dedupe_key)

        return await self.store.write(op)

    async def get(self, item_id: int) -> OutboxItem | None:
        def op(db: Database) -> OutboxItem | None:
            rows = db.execute_returning_dicts("SELECT * FROM outbox WHERE id = ?", [item_id])
            return _item(rows[0]) if rows else None

        return await self.store.run(op)

    async def due(self, surface: str, limit: int = 50) -> list[OutboxItem]:
        """Pending rows for `surface` whose retry time has come, oldest first. On a shared store they are
        claimed for this process (rows another live process claimed are skipped, locked ones too), so two
        residents never deliver one row; recording the outcome ends the claim."""
        return (await self.due_except(surface, limit, {})).items

    async def due_except(self, surface: str, limit: int, handed: Mapping[int, int],
                         busy: frozenset[str] | None = None) -> Due:
        """`due`, for a dispatcher whose rows `handed` (id → revision) are still being delivered: those
        rows are read (and on a shared store claimed again, which renews their lease) but not parsed or
        returned unless rewritten since. With `busy` (the chats whose lanes are delivering), the first
        new message of each other chat is marked as being sent in the same transaction (`mark_sending`: it goes out
        next, so the dispatcher saves that round trip)."""
        def op(db: Database) -> Due:
            rows = self._claim(db, surface, limit) if self.store.shared else db.execute_returning_dicts(
                "SELECT * FROM outbox WHERE state = 'pending' AND surface = ?"
                " AND (next_attempt_at IS NULL OR next_attempt_at <= ?) ORDER BY id LIMIT ?",
                [surface, iso(utcnow()), limit])
            due = Due(items=[], read=len(rows))
            seen = set(busy) if busy is not None else None
            for r in rows:
                if handed.get(r["id"]) == r["revision"]:
                    continue
                item = _item(r)
                due.items.append(item)
                if seen is None or r["chat_id"] in seen or r["id"] in handed:
                    continue
                seen.add(r["chat_id"])
                if item.platform_message_id is None and item.outbound.edit_of_outbox_id is None:
                    due.sending.add(item.id)
            if due.sending:
                marks = ", ".join("?" * len(due.sending))
                db.execute(f"UPDATE outbox SET sending_at = ? WHERE id IN ({marks})", [iso(utcnow()), *due.sending])
            return due

        return await self.store.run(op)

    def _claim(self, db: Database, surface: str, limit: int) -> list[dict[str, Any]]:
        now, me = self.store.now(), self.store.owner
        rows = db.execute_returning_dicts(
            "UPDATE outbox SET owner = ?, lease_until = ? WHERE id IN (SELECT id FROM outbox"
            " WHERE state = 'pending' AND surface = ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?)"
            " AND (owner IS NULL OR owner = ? OR lease_until <= ?) ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)"
            " RETURNING *", [me, lease_until(now), surface, iso(utcnow()), me, iso(now), limit])
        return sorted(rows, key=lambda r: r["id"])

    async def mark_sending(self, item_id: int) -> None:
        """Record that a new message's send begins: until its outcome is recorded, it may be on the
        platform without the row knowing."""
        await self.store.run(lambda db: db.execute("UPDATE outbox SET sending_at = ? WHERE id = ?",
                                                   [iso(utcnow()), item_id]))

    async def mark_sent(self, item_id: int, platform_message_id: str | None, revision: int = 0) -> None:
        """Record the delivery of `revision`. The platform id is kept in any case; a row rewritten since
        stays pending, and its next delivery edits that message."""
        await self.store.write(lambda db: db.execute(  # lanes deliver side by side: marked together
            "UPDATE outbox SET state = CASE WHEN revision = ? THEN 'sent' ELSE state END, platform_message_id = ?,"
            f" sent_at = ?, error = NULL, {_CLEAR} WHERE id = ?",
            [revision, platform_message_id, iso(utcnow()), item_id]))

    async def mark_retry(self, item_id: int, error: str, next_attempt_at: str, *, in_doubt: bool = False) -> None:
        """Schedule another attempt; `in_doubt` keeps the mark that the failed send may have arrived."""
        await self.store.run(lambda db: db.execute(
            "UPDATE outbox SET attempts = attempts + 1, error = ?, next_attempt_at = ?, "
            "sending_at = CASE WHEN ? THEN sending_at ELSE NULL END, owner = NULL, lease_until = NULL WHERE id = ?",
            [error, next_attempt_at, in_doubt, item_id]))

    async def mark_failed(self, item_id: int, error: str) -> None:
        await self.store.run(lambda db: db.execute(
            f"UPDATE outbox SET state = 'failed', attempts = attempts + 1, error = ?, {_CLEAR} WHERE id = ?",
            [error, item_id]))

    async def backlog(self) -> list[Backlog]:
        """Per surface: pending (and retrying) rows, rows given up on, the oldest pending one."""
        return await self.store.run(lambda db: [Backlog.model_validate(r) for r in db.execute_returning_dicts(
            "SELECT surface, count(*) FILTER (WHERE state = 'pending') AS pending,"
            " count(*) FILTER (WHERE state = 'pending' AND attempts > 0) AS retrying,"
            " count(*) FILTER (WHERE state = 'failed') AS failed,"
            " min(CASE WHEN state = 'pending' THEN created_at END) AS oldest_pending_at"
            " FROM outbox WHERE state != 'sent' GROUP BY surface ORDER BY surface")])


def put_outbound(db: Database, outbound: Outbound, dedupe_key: str) -> int:
    """`Outbox.put` on the store thread: insert the row for `dedupe_key`, or rewrite that row (pending
    again, so the dispatcher sends or edits). A row that failed gets the new text as a new chance (one
    refused edit of a streaming reply must not lose the rest); an unchanged row is left be."""
    payload = outbound.model_dump_json()
    row = db.execute("SELECT id, state, payload FROM outbox WHERE dedupe_key = ?", [dedupe_key]).fetchone()
    if row is None:  # inserted unless another process wrote the key since: then rewrite that row
        new = db.execute(_INSERT, [dedupe_key, outbound.origin.surface, outbound.origin.chat_id,
                                   outbound.origin.thread_id, payload, iso(utcnow())]).fetchone()
        if new is not None:
            return int(new[0])
        row = db.execute("SELECT id, state, payload FROM outbox WHERE dedupe_key = ?", [dedupe_key]).fetchone()
    item_id, state, old = row
    if state in ("sent", "failed") and old != payload:
        db.execute("UPDATE outbox SET payload = ?, state = 'pending', attempts = 0, next_attempt_at = NULL,"
                   " error = NULL, revision = revision + 1 WHERE id = ?", [payload, item_id])
    elif state == "pending" and old != payload:  # a retry time already set still applies
        db.execute("UPDATE outbox SET payload = ?, revision = revision + 1 WHERE id = ?", [payload, item_id])
    return int(item_id)


def add_outbound(db: Database, outbound: Outbound, dedupe_key: str | None = None) -> int:
    """`Outbox.enqueue` on the store thread, for a caller that writes the row in its own transaction
    (an approval and its prompt). The caller wakes the dispatcher afterwards."""
    new = db.execute(_INSERT, [dedupe_key, outbound.origin.surface, outbound.origin.chat_id,
                               outbound.origin.thread_id, outbound.model_dump_json(), iso(utcnow())]).fetchone()
    if new is not None:
        return int(new[0])
    return int(db.execute("SELECT id FROM outbox WHERE dedupe_key = ?", [dedupe_key]).fetchone()[0])
