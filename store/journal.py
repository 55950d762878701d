"""The tool-call journal: a call with an effect is recorded as started before it runs, and completed by
its result row in the same transaction that stores that row.

After a crash, a call found `started` with no result may or may not have had its effect. The runtime
never runs it again silently: it completes it with an "outcome unknown" result (state `unknown`) and
tells the owner. `read` tools are not journalled: running one again is harmless.
"""

from __future__ import annotations

from store.db import Store
from store.messages import add_message
from store.records import MessageRecord, iso, utcnow
from store.tables import Database


class ToolJournal:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def start(self, session_id: str, turn_id: str, tool_call_id: str, tool: str, args_sha256: str) -> None:
        """Record that the call is about to run (one insert)."""
        await self.store.run(lambda db: db.execute(
            "INSERT INTO tool_journal (session_id, turn_id, tool_call_id, tool, args_sha256, owner, state,"
            " started_at) VALUES (?, ?, ?, ?, ?, ?, 'started', ?) ON CONFLICT (session_id, turn_id, tool_call_id)"
            " DO UPDATE SET tool = excluded.tool, args_sha256 = excluded.args_sha256, owner = excluded.owner,"
            " state = excluded.state, started_at = excluded.started_at, finished_at = NULL, message_id = NULL",
            [session_id, turn_id, tool_call_id, tool, args_sha256, self.store.owner, iso(utcnow())]))

    async def add_result(self, msg: MessageRecord, state: str | None) -> int:
        """Store a tool-result row and, when its call was journalled (`state` is `done` or `unknown`),
        complete the journal entry with it, in one transaction. Returns the message id."""

        def op(db: Database) -> int:
            if state is None:
                return add_message(db, msg)
            with db.atomic():
                message_id = add_message(db, msg)
                db.execute("UPDATE tool_journal SET state = ?, finished_at = ?, message_id = ?"
                           " WHERE session_id = ? AND turn_id = ? AND tool_call_id = ?",
                           [state, iso(utcnow()), message_id, msg.session_id, msg.turn_id, msg.tool_call_id])
                return message_id

        return await self.store.run(op)

    async def interrupted(self, session_id: str, turn_id: str) -> dict[str, str]:
        """Calls of the turn that started and never finished: call id -> tool name."""
        rows = await self.store.run(lambda db: db.execute(
            "SELECT tool_call_id, tool FROM tool_journal WHERE session_id = ? AND turn_id = ? AND state = 'started'",
            [session_id, turn_id]).fetchall())
        return {r[0]: r[1] for r in rows}
