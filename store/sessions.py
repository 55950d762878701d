"""Sessions: one conversation per (surface, chat, thread[, user in groups])."""

from __future__ import annotations

from typing import Any

from store.db import Store
from store.records import Origin, SessionRecord, dumps, iso, row_to, utcnow
from store.tables import Database

_JSON = ("pinned_toolsets", "last_selection")


def session_id_for(origin: Origin, user_id: str | None = None) -> str:
    """The session key: the origin, plus the user when a group chat is shared by many people."""
    key = origin.key()
    return f"{key}#{user_id}" if user_id else key


class Sessions:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def get_or_create(self, session_id: str, origin: Origin, user_key: str, kind: str = "chat") -> SessionRecord:
        return await self.store.write(lambda db: get_or_create_session(db, session_id, origin, user_key, kind))

    async def get(self, session_id: str) -> SessionRecord | None:
        def op(db: Database) -> SessionRecord | None:
            rows = list(db["sessions"].rows_where("id = ?", [session_id]))
            return row_to(SessionRecord, rows[0], _JSON) if rows else None

        return await self.store.run(op)

    async def recent(self, limit: int = 50) -> list[SessionRecord]:
        """Every user's sessions, most recently active first (the dashboard)."""
        return await self.store.run(lambda db: [row_to(SessionRecord, r, _JSON) for r in db.execute_returning_dicts(
            "SELECT * FROM sessions ORDER BY updated_at DESC LIMIT ?", [limit])])

    async def update(self, session_id: str, **fields: Any) -> None:
        """Set columns; list/dict values are stored as JSON."""
        await self.store.run(lambda db: update_session(db, session_id, fields))

    async def new_epoch(self, session_id: str) -> int:
        """Start a fresh context (`/new`): old messages stay searchable but leave the model's view."""

        def op(db: Database) -> int:
            return int(db.execute("UPDATE sessions SET epoch = epoch + 1, updated_at = ? WHERE id = ? RETURNING epoch",
                                  [iso(utcnow()), session_id]).fetchone()[0])

        return await self.store.run(op)


def get_or_create_session(db: Database, session_id: str, origin: Origin, user_key: str,
                          kind: str = "chat") -> SessionRecord:
    """`Sessions.get_or_create` on the store thread, for a caller doing it in its own transaction."""
    rows = db.execute_returning_dicts("SELECT * FROM sessions WHERE id = ?", [session_id])
    if not rows:  # read first: an existing session (every turn but the first) costs no write
        now = iso(utcnow())
        db.execute(
            "INSERT INTO sessions (id, surface, chat_id, thread_id, user_key, kind, created_at,"
            " updated_at) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            [session_id, origin.surface, origin.chat_id, origin.thread_id, user_key, kind, now, now],
        )
        rows = db.execute_returning_dicts("SELECT * FROM sessions WHERE id = ?", [session_id])
    return row_to(SessionRecord, rows[0], _JSON)


def update_session(db: Database, session_id: str, fields: dict[str, Any]) -> None:
    """`Sessions.update` on the store thread, for a caller writing it in its own transaction."""
    values = {k: (dumps(v) if isinstance(v, (list, dict)) else v) for k, v in fields.items()}
    values["updated_at"] = iso(utcnow())
    # Plain SQL: sqlite-utils' Table.update reads the row and the table's schema first (a turn pays it).
    db.execute(f"UPDATE sessions SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
               [*values.values(), session_id])
