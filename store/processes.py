"""Background processes Anyy started, per session. The row outlives the process: after a restart a
row still `running` belongs to a process that nobody supervises any more, and becomes `lost`."""

from __future__ import annotations

import builtins  # inside `Processes`, `list` is its method: its annotations name builtins.list
from typing import Any

from store.db import Store
from store.leases import owner_alive
from store.records import ProcessRecord, iso, row_to, utcnow
from store.tables import Database


class Processes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def add(self, rec: ProcessRecord) -> None:
        row = {**rec.model_dump(), "owner": rec.owner or self.store.owner}
        await self.store.run(lambda db: db["processes"].insert(row))

    async def get(self, session_id: str, process_id: str) -> ProcessRecord | None:
        """One of the session's processes; None when missing or another session's."""

        def op(db: Database) -> ProcessRecord | None:
            rows = list(db["processes"].rows_where("id = ? AND session_id = ?", [process_id, session_id]))
            return row_to(ProcessRecord, rows[0]) if rows else None

        return await self.store.run(op)

    async def list(self, session_id: str, limit: int = 50) -> list[ProcessRecord]:
        def op(db: Database) -> list[ProcessRecord]:
            rows = db["processes"].rows_where("session_id = ?", [session_id], order_by="started_at DESC", limit=limit)
            return [row_to(ProcessRecord, r) for r in rows]

        return await self.store.run(op)

    async def finish(self, process_id: str, state: str, exit_code: int | None) -> bool:
        """Move a running process to its end state; False when it had already ended."""

        def op(db: Database) -> bool:
            cur = db.execute("UPDATE processes SET state = ?, exit_code = ?, finished_at = ? "
                             "WHERE id = ? AND state = 'running'", [state, exit_code, iso(utcnow()), process_id])
            return cur.rowcount == 1

        return await self.store.run(op)

    async def mark_lost(self, keep: set[str] | frozenset[str] = frozenset()) -> builtins.list[dict[str, Any]]:
        """At start-up: every row still `running` (except `keep`) whose supervisor is gone — this
        process's predecessor, or a stopped one on this host — lost it. Returns them. A process another
        live resident supervises (here, or on another machine: processes are per machine) is its own."""
        me = self.store.owner

        def gone(owner: str | None) -> bool:
            return owner is None or owner == me or not owner_alive(owner)

        def op(db: Database) -> list[dict[str, Any]]:
            rows = [r for r in db["processes"].rows_where("state = 'running'")
                    if r["id"] not in keep and gone(r.get("owner"))]
            for r in rows:
                db.execute("UPDATE processes SET state = 'lost', finished_at = ? WHERE id = ? AND state = 'running'",
                           [iso(utcnow()), r["id"]])
            return rows

        return await self.store.run(op)
