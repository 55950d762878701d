"""Durable personal tasks, per user."""

from __future__ import annotations

from typing import Any

from store.db import Store
from store.records import TaskRecord, iso, row_to, utcnow
from store.tables import Database


class Tasks:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, user_key: str, title: str, notes: str = "", due: str | None = None) -> TaskRecord:
        def op(db: Database) -> TaskRecord:
            now = iso(utcnow())
            row = {"user_key": user_key, "title": title, "notes": notes, "due": due, "status": "open",
                   "created_at": now, "updated_at": now}
            pk = db["tasks"].insert(row).last_pk
            return TaskRecord(id=pk, user_key=user_key, title=title, notes=notes, due=due, status="open",
                              created_at=now, updated_at=now)

        return await self.store.run(op)

    async def get(self, user_key: str, task_id: int) -> TaskRecord | None:
        def op(db: Database) -> TaskRecord | None:
            rows = list(db["tasks"].rows_where("id = ? AND user_key = ?", [task_id, user_key]))
            return row_to(TaskRecord, rows[0]) if rows else None

        return await self.store.run(op)

    async def list(self, user_key: str | None, status: str | None = "open", limit: int = 50) -> list[TaskRecord]:
        """One user's tasks (None: every user's, for the owner's dashboard), the soonest due first."""

        def op(db: Database) -> list[TaskRecord]:
            where, args = ("user_key = ?", [user_key]) if user_key is not None else ("1 = 1", [])
            if status:
                where += " AND status = ?"
                args.append(status)
            rows = db["tasks"].rows_where(where, args, order_by="due IS NULL, due, id", limit=limit)
            return [row_to(TaskRecord, r) for r in rows]

        return await self.store.run(op)

    async def update(self, user_key: str, task_id: int, **fields: Any) -> TaskRecord | None:
        """Change the given fields of one of the user's tasks; None when it is not theirs or missing."""

        def op(db: Database) -> TaskRecord | None:
            rows = list(db["tasks"].rows_where("id = ? AND user_key = ?", [task_id, user_key]))
            if not rows:
                return None
            db["tasks"].update(task_id, {**fields, "updated_at": iso(utcnow())})
            return row_to(TaskRecord, db["tasks"].get(task_id))

        return await self.store.run(op)
