"""Subagent job rows: who started which child turn, what it may use, and how it ended."""

from __future__ import annotations

from typing import Any

from store.db import Store
from store.records import JobState, SubagentJob, dumps, iso, row_to, utcnow
from store.sql import lock
from store.tables import Database

_JSON = ("origin", "toolsets")


class SubagentJobs:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create_if_room(self, job: SubagentJob, max_running: int) -> bool:
        """Insert the job unless its user already has `max_running` running jobs (one transaction, so
        two parents starting helpers at once cannot both squeeze past the limit)."""
        row: dict[str, Any] = job.model_dump()
        row["origin"] = job.origin.model_dump_json()
        row["toolsets"] = dumps(job.toolsets)

        def op(db: Database) -> bool:
            with db.atomic():
                lock(db, f"subagents:{job.user_key}")  # the count and the insert, one at a time per user
                running = db.execute("SELECT COUNT(*) FROM subagent_jobs WHERE user_key = ? AND state = 'running'",
                                     [job.user_key]).fetchone()[0]
                if running >= max_running:
                    return False
                db["subagent_jobs"].insert(row)
                return True

        return await self.store.run(op)

    async def get(self, job_id: str) -> SubagentJob | None:
        def op(db: Database) -> SubagentJob | None:
            rows = db.execute_returning_dicts("SELECT * FROM subagent_jobs WHERE id = ?", [job_id])
            return row_to(SubagentJob, rows[0], _JSON) if rows else None

        return await self.store.run(op)

    async def by_child_session(self, session_id: str) -> SubagentJob | None:
        def op(db: Database) -> SubagentJob | None:
            rows = db.execute_returning_dicts("SELECT * FROM subagent_jobs WHERE child_session_id = ?", [session_id])
            return row_to(SubagentJob, rows[0], _JSON) if rows else None

        return await self.store.run(op)

    async def for_parent(self, session_id: str, limit: int = 20) -> list[SubagentJob]:
        return await self.store.run(lambda db: [row_to(SubagentJob, r, _JSON) for r in db.execute_returning_dicts(
            "SELECT * FROM subagent_jobs WHERE parent_session_id = ? ORDER BY created_at DESC LIMIT ?",
            [session_id, limit])])

    async def running(self) -> list[SubagentJob]:
        return await self.store.run(lambda db: [row_to(SubagentJob, r, _JSON) for r in db.execute_returning_dicts(
            "SELECT * FROM subagent_jobs WHERE state = 'running'")])

    async def finish(self, job_id: str, state: JobState, summary: str | None) -> SubagentJob | None:
        """Move a running job to its end state, once. None when it had ended already (e.g. cancelled)."""

        def op(db: Database) -> SubagentJob | None:
            with db.atomic():
                cur = db.execute(
                    "UPDATE subagent_jobs SET state = ?, summary = ?, finished_at = ?"
                    " WHERE id = ? AND state = 'running'",
                    [state, summary, iso(utcnow()), job_id])
                if cur.rowcount != 1:
                    return None
                return row_to(SubagentJob, db.execute_returning_dicts(
                    "SELECT * FROM subagent_jobs WHERE id = ?", [job_id])[0], _JSON)

        return await self.store.run(op)
