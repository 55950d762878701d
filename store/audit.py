"""Audit events: every approval state change and every audited tool run."""

from __future__ import annotations

from store.db import Store
from store.records import AuditEvent, dumps, row_to
from store.tables import Database


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

    async def list(self, since: str | None = None, limit: int = 200, *, until: str | None = None,
                   tool: str | None = None) -> list[AuditEvent]:
        """The newest `limit` events at or after `since` and before `until` (ISO UTC), of one `tool`
        when given; oldest first."""

        def op(db: Database) -> list[AuditEvent]:
            where, args = ["at >= ?"], [since or ""]
            if until:
                where.append("at < ?")
                args.append(until)
            if tool:
                where.append("tool = ?")
                args.append(tool)
            rows = db.execute_returning_dicts(
                f"SELECT * FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?", [*args, limit])
            return [row_to(AuditEvent, r, ("detail",)) for r in reversed(rows)]

        return await self.store.run(op)

    async def count(self, action: str, since: str) -> int:
        """How many events of `action` happened at or after `since` (ISO UTC)."""
        return await self.store.run(lambda db: int(db.execute(
            "SELECT count(*) FROM audit WHERE action = ? AND at >= ?", [action, since]).fetchone()[0]))
