"""Audit events: every approval state change and every audited tool run."""

from __future__ import annotations

from sqlite_utils import Database

from store.db import Store
from store.records import AuditEvent, dumps, row_to


def add_audit(db: Database, event: AuditEvent) -> None:
    """Insert an audit event on the store thread (use inside another store operation's transaction)."""
    row = event.model_dump(exclude={"id"})
    row["detail"] = dumps(event.detail)
    db["audit"].insert(row)


class Audit:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def add(self, event: AuditEvent) -> None:
        await self.store.run(lambda db: add_audit(db, event))

    async def list(self, since: str | None = None, limit: int = 200) -> list[AuditEvent]:
        def op(db: Database) -> list[AuditEvent]:
            rows = db.execute_returning_dicts(
                "SELECT * FROM audit WHERE at >= ? ORDER BY id DESC LIMIT ?", [since or "", limit]
            )
            return [row_to(AuditEvent, r, ("detail",)) for r in reversed(rows)]

        return await self.store.run(op)
