"""Which version of which file each session has read: "read before overwrite" checks against it."""

from __future__ import annotations

from store.db import Store
from store.records import iso, utcnow
from store.tables import Database


class FileReads:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, session_id: str, path: str, sha256: str) -> None:
        """Remember that `session_id` has seen `path` with this content hash (replacing an older read)."""

        def op(db: Database) -> None:
            db["file_reads"].upsert({"session_id": session_id, "path": path, "sha256": sha256,
                                     "read_at": iso(utcnow())}, pk=("session_id", "path"))

        await self.store.run(op)

    async def get(self, session_id: str, path: str) -> str | None:
        """The hash this session last read `path` with, or None when it never read it."""

        def op(db: Database) -> str | None:
            row = db.execute("SELECT sha256 FROM file_reads WHERE session_id = ? AND path = ?",
                             [session_id, path]).fetchone()
            return row[0] if row else None

        return await self.store.run(op)
