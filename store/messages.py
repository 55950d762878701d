"""The transcript: every user message, assistant reply, tool call and result, with FTS5 search (indexed
in batches, `store.search_index`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from store import search_index
from store.db import Store
from store.records import MessageRecord, dumps, row_to
from store.sql import is_pg
from store.tables import Database

_JSON = ("tool_calls", "meta")
INDEX_BATCH = 32  # rows written here before `index_due` asks for a catch-up of the search index


class SearchHit(BaseModel):
    message_id: int
    session_id: str
    turn_id: str
    role: str
    created_at: str
    snippet: str


def fts_quote(query: str) -> str:
    """Quote free text for FTS5 MATCH: every term becomes a literal phrase, so no input is syntax."""
    terms = [t for t in re.split(r"\s+", query.strip()) if t]
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


class Messages:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._unindexed = 0  # rows this repository wrote since its last catch-up

    @property
    def index_due(self) -> bool:
        """Enough rows were written here that the search index should catch up (off a turn's path)."""
        return self._unindexed >= INDEX_BATCH

    async def catch_up(self) -> None:
        """Bring the search index up to date with every row written so far, by any process."""
        self._unindexed = 0
        await self.store.run(search_index.catch_up)

    def wrote(self, rows: int = 1) -> None:
        """Count rows written through `add_message` in someone else's transaction."""
        self._unindexed += rows

    async def add(self, msg: MessageRecord) -> int:
        self._unindexed += 1
        return await self.store.run(lambda db: add_message(db, msg))

    async def add_many(self, msgs: list[MessageRecord]) -> None:
        def op(db: Database) -> None:
            with db.atomic():
                for m in msgs:
                    add_message(db, m)

        self._unindexed += len(msgs)
        await self.store.run(op)

    async def recent(self, session_id: str, epoch: int, limit: int) -> list[MessageRecord]:
        """The newest `limit` messages of the session's current epoch, oldest first."""

        def op(db: Database) -> list[MessageRecord]:
            rows = db.execute_returning_dicts(
                "SELECT * FROM messages WHERE session_id = ? AND epoch = ? ORDER BY id DESC LIMIT ?",
                [session_id, epoch, limit],
            )
            return [row_to(MessageRecord, r, _JSON) for r in reversed(rows)]

        return await self.store.run(op)

    async def latest_summary(self, session_id: str, epoch: int) -> MessageRecord | None:
        """The session's newest summary row (see gateway/turns/compaction.py), if any."""
        return await self.store.read(lambda db: newest_summary(db, session_id, epoch))

    async def between(self, session_id: str, epoch: int, after_id: int, limit: int) -> list[MessageRecord]:
        """Up to `limit` of the epoch's non-summary rows newer than `after_id`, oldest first."""

        def op(db: Database) -> list[MessageRecord]:
            rows = db.execute_returning_dicts(
                "SELECT * FROM messages WHERE session_id = ? AND epoch = ? AND id > ? AND role != 'summary'"
                " ORDER BY id LIMIT ?", [session_id, epoch, after_id, limit])
            return [row_to(MessageRecord, r, _JSON) for r in rows]

        return await self.store.run(op)

    async def get(self, message_id: int) -> MessageRecord | None:
        def op(db: Database) -> MessageRecord | None:
            rows = db.execute_returning_dicts("SELECT * FROM messages WHERE id = ?", [message_id])
            return row_to(MessageRecord, rows[0], _JSON) if rows else None

        return await self.store.run(op)

    async def search(self, user_key: str | None, query: str, limit: int = 10) -> list[SearchHit]:
        """Full-text search over one user's messages (every user's when `user_key` is None: the owner's
        dashboard). Short terms (under 3 characters, common in Chinese) fall back to LIKE because the
        trigram index cannot match them."""

        def op(db: Database) -> list[SearchHit]:
            terms = [t for t in query.split() if t]
            who, who_args = ("m.user_key = ?", [user_key]) if user_key is not None else ("1 = 1", [])
            if is_pg(db):
                return _search_pg(db, terms, who, who_args, limit)
            search_index.catch_up(db)
            if terms and all(len(t) >= 3 for t in terms):
                rows = db.execute_returning_dicts(
                    "SELECT m.id, m.session_id, m.turn_id, m.role, m.created_at,"
                    " snippet(messages_fts, 0, '[', ']', '…', 40) AS snippet"
                    " FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
                    f" WHERE messages_fts MATCH ? AND {who} AND m.role IN ('user','assistant','summary')"
                    " ORDER BY m.id DESC LIMIT ?",
                    [fts_quote(query), *who_args, limit],
                )
            else:
                like = [_contains(t) for t in terms] or ["%"]
                where = " AND ".join(f"content {_LIKE}" for _ in like)
                rows = db.execute_returning_dicts(
                    "SELECT id, session_id, turn_id, role, created_at, substr(content, 1, 160) AS snippet"
                    " FROM messages m"
                    f" WHERE {where} AND {who} AND role IN ('user','assistant','summary') ORDER BY id DESC LIMIT ?",
                    [*like, *who_args, limit],
                )
            return [
                SearchHit(message_id=r["id"], session_id=r["session_id"], turn_id=r["turn_id"], role=r["role"],
                          created_at=r["created_at"], snippet=r["snippet"])
                for r in rows
            ]

        return await self.store.run(op)


def _search_pg(db: Database, terms: list[str], who: str, who_args: list[Any], limit: int) -> list[SearchHit]:
    """PostgreSQL: every term by ILIKE (served by the pg_trgm index where there is one, any script and
    any length), newest first; the snippet marks the first term as SQLite's FTS5 snippet does."""
    like = [_contains(t) for t in terms] or ["%"]
    rows = db.execute_returning_dicts(
        "SELECT id, session_id, turn_id, role, created_at, content FROM messages m"
        f" WHERE {' AND '.join(f'content I{_LIKE}' for _ in like)} AND {who}"
        " AND role IN ('user','assistant','summary') ORDER BY id DESC LIMIT ?", [*like, *who_args, limit])
    return [SearchHit(message_id=r["id"], session_id=r["session_id"], turn_id=r["turn_id"], role=r["role"],
                      created_at=r["created_at"], snippet=_snippet(r["content"], terms)) for r in rows]


_ESC = "\\"  # the LIKE escape character, named in each statement (PostgreSQL's default, not SQLite's)
_LIKE = f"LIKE ? ESCAPE '{_ESC}'"


def _contains(term: str) -> str:
    """The LIKE pattern "contains `term`" with `term` literal: its `%`, `_` and escapes match themselves."""
    return "%" + term.replace(_ESC, _ESC * 2).replace("%", _ESC + "%").replace("_", _ESC + "_") + "%"


def _snippet(content: str, terms: list[str], width: int = 60) -> str:
    at = content.lower().find(terms[0].lower()) if terms else -1
    if at < 0:
        return content[:160]
    end = at + len(terms[0])
    start = max(0, at - width)
    head = "…" if start > 0 else ""
    tail = "…" if end + width < len(content) else ""
    return f"{head}{content[start:at]}[{content[at:end]}]{content[end:end + width]}{tail}"


def add_message(db: Database, msg: MessageRecord) -> int:
    row: dict[str, Any] = msg.model_dump(exclude={"id"})
    row["tool_calls"] = dumps([c.model_dump() for c in msg.tool_calls]) if msg.tool_calls else None
    row["meta"] = dumps(msg.meta) if msg.meta else None
    return int(db.execute(
        f"INSERT INTO messages ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)}) RETURNING id",
        list(row.values())).fetchone()[0])


def messages_after(db: Database, session_id: str, epoch: int, after_id: int) -> list[MessageRecord]:
    """Messages of the session's epoch newer than `after_id`, oldest first."""
    rows = db.execute_returning_dicts(
        "SELECT * FROM messages WHERE session_id = ? AND epoch = ? AND id > ? ORDER BY id",
        [session_id, epoch, after_id])
    return [row_to(MessageRecord, r, _JSON) for r in rows]


def messages_within(db: Database, session_id: str, epoch: int, budget_chars: int,
                    after_id: int = 0, max_messages: int | None = None) -> list[MessageRecord]:
    """The newest whole turns of the session's current epoch newer than `after_id` whose text fits
    `budget_chars` and whose rows number at most `max_messages` (at least the newest turn; one turn past
    it when there is more, so a caller cutting to the budget learns that older rows were left out), oldest
    first, summaries left out. Sizes are summed on raw rows, so a months-long session costs only the rows
    that fit, never the whole history."""
    cur = db.execute(
        "SELECT *, length(content) + coalesce(length(tool_calls), 0) AS size FROM messages"
        " WHERE session_id = ? AND epoch = ? AND id > ? AND role != 'summary' ORDER BY id DESC",
        [session_id, epoch, after_id])
    names = [d[0] for d in cur.description]
    kept: list[dict[str, Any]] = []
    used, turn = 0, None
    for raw in cur:
        row = dict(zip(names, raw, strict=True))
        if row["turn_id"] != turn:  # a turn boundary: stop here if the budget is spent
            if kept and (used > budget_chars or (max_messages is not None and len(kept) > max_messages)):
                break
            turn = row["turn_id"]
        used += row.pop("size")
        kept.append(row)
    return [row_to(MessageRecord, r, _JSON) for r in reversed(kept)]


def newest_summary(db: Database, session_id: str, epoch: int) -> MessageRecord | None:
    """The session's newest summary row of the epoch, if any."""
    rows = db.execute_returning_dicts(
        "SELECT * FROM messages WHERE session_id = ? AND epoch = ? AND role = 'summary' ORDER BY id DESC"
        " LIMIT 1", [session_id, epoch])
    return row_to(MessageRecord, rows[0], _JSON) if rows else None
