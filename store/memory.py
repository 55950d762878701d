"""Long-term memory entries, per user: facts about the user and the assistant's own notes."""

from __future__ import annotations

from typing import Literal

from store.db import Store
from store.records import MemoryEntry, iso, row_to, utcnow
from store.tables import Database


class Memory:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, user_key: str | None, target: str | None = None) -> list[MemoryEntry]:
        """One user's entries (None: every user's, for the owner's dashboard), oldest first."""

        return await self.store.run(lambda db: list_memory(db, user_key, target))

    async def add(self, user_key: str, target: Literal["user", "notes"], content: str) -> MemoryEntry:
        def op(db: Database) -> MemoryEntry:
            now = iso(utcnow())
            row = {"user_key": user_key, "target": target, "content": content, "created_at": now}
            return MemoryEntry(id=db["memory"].insert(row).last_pk, user_key=user_key, target=target,
                               content=content, created_at=now)

        return await self.store.run(op)

    async def get(self, entry_id: int) -> MemoryEntry | None:
        rows = await self.store.run(lambda db: list(db["memory"].rows_where("id = ?", [entry_id])))
        return row_to(MemoryEntry, rows[0]) if rows else None

    async def set_content(self, entry_id: int, content: str) -> None:
        await self.store.run(lambda db: db["memory"].update(entry_id, {"content": content}))

    async def remove(self, entry_id: int) -> None:
        await self.store.run(lambda db: db["memory"].delete(entry_id))


def list_memory(db: Database, user_key: str | None, target: str | None = None) -> list[MemoryEntry]:
    """`Memory.list` on the store thread, for a caller that reads the entries along its own writes (a
    turn's start)."""
    where, args = ("user_key = ?", [user_key]) if user_key is not None else ("1 = 1", [])
    if target:
        where += " AND target = ?"
        args.append(target)
    return [row_to(MemoryEntry, r) for r in db["memory"].rows_where(where, args, order_by="id")]
