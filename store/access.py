"""Who may talk to the assistant: users admitted by pairing, and the pending pairing codes."""

from __future__ import annotations

from store.db import Store
from store.records import PairingRecord, iso, row_to, utcnow
from store.tables import Database


class AccessRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def is_admitted(self, surface: str, user_id: str) -> bool:
        return await self.store.run(lambda db: db.execute(
            "SELECT 1 FROM allowed_users WHERE surface = ? AND user_id = ?", [surface, user_id]).fetchone() is not None)

    async def admitted(self) -> list[tuple[str, str, str]]:
        return await self.store.run(lambda db: [tuple(r) for r in db.execute(
            "SELECT surface, user_id, added_at FROM allowed_users ORDER BY added_at").fetchall()])

    async def revoke(self, surface: str, user_id: str) -> bool:
        return await self.store.run(lambda db: db.execute(
            "DELETE FROM allowed_users WHERE surface = ? AND user_id = ?", [surface, user_id]).rowcount > 0)

    async def current_code(self, surface: str, user_id: str) -> PairingRecord | None:
        """The user's unexpired pairing code, if any."""

        def op(db: Database) -> PairingRecord | None:
            rows = db.execute_returning_dicts(
                "SELECT * FROM pairing WHERE surface = ? AND user_id = ? AND expires_at > ?",
                [surface, user_id, iso(utcnow())])
            return row_to(PairingRecord, rows[0]) if rows else None

        return await self.store.run(op)

    async def add_code(self, rec: PairingRecord) -> None:
        def op(db: Database) -> None:
            with db.atomic():
                db.execute("DELETE FROM pairing WHERE surface = ? AND user_id = ?", [rec.surface, rec.user_id])
                db["pairing"].insert(rec.model_dump())

        await self.store.run(op)

    async def bump_attempts(self, code: str) -> int:
        def op(db: Database) -> int:
            row = db.execute("UPDATE pairing SET attempts = attempts + 1 WHERE code = ? RETURNING attempts",
                             [code]).fetchone()
            return int(row[0]) if row else 0

        return await self.store.run(op)

    async def redeem(self, surface: str, code: str) -> PairingRecord | None:
        """Admit the user behind an unexpired code (one use). None when there is no such code."""

        def op(db: Database) -> PairingRecord | None:
            with db.atomic():
                rows = db.execute_returning_dicts(
                    "SELECT * FROM pairing WHERE surface = ? AND code = ? AND expires_at > ?",
                    [surface, code.upper(), iso(utcnow())])
                if not rows:
                    return None
                rec = row_to(PairingRecord, rows[0])
                db.execute("DELETE FROM pairing WHERE code = ?", [rec.code])
                db.execute("INSERT INTO allowed_users (surface, user_id, added_at) VALUES (?, ?, ?)"
                           " ON CONFLICT DO NOTHING",
                           [surface, rec.user_id, iso(utcnow())])
                return rec

        return await self.store.run(op)

    async def pending(self) -> list[PairingRecord]:
        return await self.store.run(lambda db: [row_to(PairingRecord, r) for r in db.execute_returning_dicts(
            "SELECT * FROM pairing WHERE expires_at > ? ORDER BY created_at", [iso(utcnow())])])
