"""Token usage, summed from the usage every model call stored on its row (replies and compaction summaries),
and the paid tool calls (image generation), counted from their audit events."""

from __future__ import annotations

from pydantic import BaseModel

from store.db import Store
from store.sql import json_number, json_text
from store.tables import Database


class UsageTotal(BaseModel):
    """The calls and tokens of one model in one kind of session (chat, automation, subagent)."""

    model: str
    kind: str
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int


class UsageRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def totals(self, *, since: str, until: str | None = None, user_key: str | None = None,
                     session_id: str | None = None) -> list[UsageTotal]:
        """Totals per (model, session kind) of calls made at or after `since` and before `until` (ISO
        times), optionally for one user or one session."""
        where, args = ["m.role IN ('assistant', 'summary')", "m.meta IS NOT NULL", "m.created_at >= ?"], [since]
        if until is not None:
            where.append("m.created_at < ?")
            args.append(until)
        if user_key is not None:
            where.append("m.user_key = ?")
            args.append(user_key)
        if session_id is not None:
            where.append("m.session_id = ?")
            args.append(session_id)

        def op(db: Database) -> list[UsageTotal]:
            def total(*path: str) -> str:
                return f"COALESCE(SUM({json_number(db, 'm.meta', *path)}), 0)"

            sql = f"""
                SELECT COALESCE({json_text(db, 'm.meta', 'model')}, '') AS model, s.kind AS kind, COUNT(*) AS calls,
                       {total('usage', 'input_tokens')} AS input_tokens,
                       {total('usage', 'output_tokens')} AS output_tokens,
                       {total('usage', 'cached_tokens')} AS cached_tokens
                FROM messages m JOIN sessions s ON s.id = m.session_id
                WHERE {' AND '.join(where)} AND {json_text(db, 'm.meta', 'usage')} IS NOT NULL
                GROUP BY 1, 2 ORDER BY 1, 2"""
            return [UsageTotal(**row) for row in db.execute_returning_dicts(sql, args)]

        return await self.store.run(op)

    async def tool_runs(self, tool: str, *, since: str, user_key: str | None = None) -> int:
        """How many audited runs of `tool` succeeded at or after `since` (ISO time), optionally for one user."""
        where, args = ["tool = ?", "action = 'tool.run'", "at >= ?"], [tool, since]
        if user_key is not None:
            where.append("actor = ?")
            args.append(user_key)
        sql = f"SELECT count(*) FROM audit WHERE {' AND '.join(where)}"
        return await self.store.run(lambda db: int(db.execute(sql, args).fetchone()[0]))
