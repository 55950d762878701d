"""Recorded trigger events and the mail watermarks that keep each message to one firing.

An event (a new message, a calendar occurrence about to start, a webhook delivery) is written once under
its key before anything fires; its automations then claim their runs under the slot ``<recorded
at>#<key>`` (`event_slot`), which the event's first recording fixes, so a re-recording after a crash
claims the same slot and is refused. A folder's watermark is its UIDVALIDITY and the last UID handled.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from store.db import Store
from store.records import dumps, iso, utcnow
from store.tables import Database

_SLOT_SEP = "#"


class TriggerEvent(BaseModel):
    """One event as recorded. `fields` fill a reminder's line ({from}, {subject}, {title}, ...); `text` is
    what a prompt's turn sees of it, as outside content from `source`."""

    key: str = Field(max_length=500)
    kind: str  # email | before_event | webhook
    source: str
    fields: dict[str, str] = Field(default_factory=dict)
    text: str = ""
    recorded_at: str = ""


def event_slot(event: TriggerEvent) -> str:
    """The run slot of an automation firing for the recorded `event`."""
    return f"{event.recorded_at}{_SLOT_SEP}{event.key}"


def slot_event_key(slot: str) -> str | None:
    """The event key of an event slot; None for a clock slot (a plain ISO time)."""
    return slot.split(_SLOT_SEP, 1)[1] if _SLOT_SEP in slot else None


def slot_time(slot: str) -> str:
    """The ISO time of a slot, clock or event."""
    return slot.split(_SLOT_SEP, 1)[0]


def _event(row: Any) -> TriggerEvent:
    payload = json.loads(row[2])
    return TriggerEvent(key=row[0], kind=row[1], recorded_at=row[3], **payload)


def record_event(db: Database, event: TriggerEvent) -> TriggerEvent:
    """Write `event` unless its key is recorded already; the stored event either way."""
    payload = dumps({"source": event.source, "fields": event.fields, "text": event.text})
    db.execute("INSERT INTO trigger_events (key, kind, payload, recorded_at) VALUES (?, ?, ?, ?)"
               " ON CONFLICT (key) DO NOTHING", [event.key, event.kind, payload, iso(utcnow())])
    row = db.execute("SELECT key, kind, payload, recorded_at FROM trigger_events WHERE key = ?",
                     [event.key]).fetchone()
    return _event(row)


class TriggerEvents:
    """The `trigger_events` and `mail_watermarks` tables."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, event: TriggerEvent) -> TriggerEvent:
        """Record `event` durably (a no-op for a key seen before); the stored event."""

        def op(db: Database) -> TriggerEvent:
            with db.atomic():
                return record_event(db, event)

        return await self.store.run(op)

    async def get(self, key: str) -> TriggerEvent | None:
        def op(db: Database) -> TriggerEvent | None:
            row = db.execute("SELECT key, kind, payload, recorded_at FROM trigger_events WHERE key = ?",
                             [key]).fetchone()
            return _event(row) if row is not None else None

        return await self.store.run(op)

    async def prune(self, kept: timedelta, now: datetime | None = None) -> int:
        """Delete events recorded more than `kept` ago, except one whose run is still unfinished (its
        delivery retried at the next start needs the event); returns how many."""
        cutoff = iso((now or utcnow()) - kept)

        # The unfinished runs are read once (a handful), not looked up per event: automation_runs has no
        # index on its slots' status, and a correlated lookup scanned it once per expired event.
        def op(db: Database) -> int:
            return int(db.execute(
                f"DELETE FROM trigger_events WHERE recorded_at < ? AND recorded_at || '{_SLOT_SEP}' || key NOT IN"
                " (SELECT scheduled_for FROM automation_runs WHERE status = 'claimed')", [cutoff]).rowcount)

        return await self.store.run(op)

    async def watermark(self, account: str, folder: str) -> tuple[int, int] | None:
        """The folder's (UIDVALIDITY, last UID handled), or None before its first look."""
        row = await self.store.run(lambda db: db.execute(
            "SELECT uidvalidity, last_uid FROM mail_watermarks WHERE account = ? AND folder = ?",
            [account, folder]).fetchone())
        return (int(row[0]), int(row[1])) if row is not None else None

    async def set_watermark(self, account: str, folder: str, uidvalidity: int, last_uid: int) -> None:
        """Store the folder's watermark. Under the same UIDVALIDITY it only moves forward (two residents
        racing after a lease change never move it back); a new UIDVALIDITY replaces it."""

        def op(db: Database) -> None:
            db.execute(
                "INSERT INTO mail_watermarks (account, folder, uidvalidity, last_uid, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account, folder) DO UPDATE SET"
                " last_uid = CASE WHEN mail_watermarks.uidvalidity = excluded.uidvalidity"
                " AND mail_watermarks.last_uid > excluded.last_uid THEN mail_watermarks.last_uid"
                " ELSE excluded.last_uid END,"
                " uidvalidity = excluded.uidvalidity, updated_at = excluded.updated_at",
                [account, folder, uidvalidity, last_uid, iso(utcnow())])

        await self.store.run(op)


def automations_version(db: Database) -> tuple[Any, ...]:
    """What changes whenever an automation is created, changed or deleted: their count and latest change."""
    return tuple(db.execute("SELECT COUNT(*), MAX(updated_at) FROM automations").fetchone())
