"""Automation rows and their run log. The rows are the source of truth for every schedule.

A run row is the claim on one firing: ``UNIQUE(automation_id, scheduled_for)`` lets exactly one claim
per slot succeed, whichever process or restart makes it.
"""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any

from store.audit import add_audit
from store.db import Store
from store.leases import lease_until, takeable
from store.records import AuditEvent, AutomationRecord, AutomationRun, dumps, iso, row_to, utcnow
from store.tables import Database

_JSON = ("origin", "schedule", "action")


def _record(row: dict[str, Any]) -> AutomationRecord:
    rec: AutomationRecord = row_to(AutomationRecord, row, _JSON)
    return rec


def _get(db: Database, automation_id: str) -> AutomationRecord | None:
    rows = db.execute_returning_dicts("SELECT * FROM automations WHERE id = ?", [automation_id])
    return _record(rows[0]) if rows else None


def _set(db: Database, automation_id: str, values: dict[str, Any], condition: str = "") -> bool:
    """UPDATE one row's columns (with an extra SQL `condition`); whether a row changed."""
    cur = db.execute(f"UPDATE automations SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?{condition}",
                     [*values.values(), automation_id])
    return cur.rowcount == 1


def _audit(db: Database, actor: str, action: str, rec: AutomationRecord) -> None:
    add_audit(db, AuditEvent(actor=actor, action=action, subject=rec.id,
                             detail={"name": rec.name, "schedule": rec.schedule, "kind": rec.action.get("kind"),
                                     "enabled": rec.enabled}))


class Automations:
    """Rows of the `automations` and `automation_runs` tables. Changes write an audit event as the actor."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, rec: AutomationRecord, actor: str) -> AutomationRecord:
        def op(db: Database) -> AutomationRecord:
            row = rec.model_dump()
            row["origin"] = rec.origin.model_dump_json()
            row["schedule"], row["action"] = dumps(rec.schedule), dumps(rec.action)
            with db.atomic():
                db.table("automations").insert(row)
                _audit(db, actor, "automation.create", rec)
            return rec

        return await self.store.run(op)

    async def get(self, automation_id: str) -> AutomationRecord | None:
        return await self.store.run(lambda db: _get(db, automation_id))

    async def list(self, user_key: str | None) -> builtins.list[AutomationRecord]:
        """One user's automations (every user's when `user_key` is None), soonest next run first."""

        def op(db: Database) -> builtins.list[AutomationRecord]:
            where, args = ("WHERE user_key = ?", [user_key]) if user_key is not None else ("", [])
            rows = db.execute_returning_dicts(
                f"SELECT * FROM automations {where} ORDER BY next_run_at IS NULL, next_run_at, created_at", args)
            return [_record(r) for r in rows]

        return await self.store.run(op)

    async def scheduled_slots(self) -> builtins.list[tuple[str, str]]:
        """(id, next run) of every enabled automation that has one: what the scheduler must hold.

        Only the two columns, because start-up reads every row and time there is the benchmark's."""
        return await self.store.run(lambda db: [(r[0], r[1]) for r in db.execute(
            "SELECT id, next_run_at FROM automations WHERE enabled = 1 AND next_run_at IS NOT NULL")])

    async def changed_since(self, since: str) -> builtins.list[AutomationRecord]:
        """Rows updated at or after `since` (ISO UTC), oldest change first."""
        return await self.store.run(lambda db: [_record(r) for r in db.execute_returning_dicts(
            "SELECT * FROM automations WHERE updated_at >= ? ORDER BY updated_at", [since])])

    async def update(self, automation_id: str, actor: str, **fields: Any) -> AutomationRecord | None:
        """Set columns (schedule/action/origin as JSON) and audit; None when the row is gone."""

        def op(db: Database) -> AutomationRecord | None:
            values = {k: (dumps(v) if isinstance(v, dict) else v) for k, v in fields.items()}
            values["updated_at"] = iso(utcnow())
            with db.atomic():
                if not _set(db, automation_id, values):
                    return None
                rec = _get(db, automation_id)
                assert rec is not None
                _audit(db, actor, "automation.update", rec)
                return rec

        return await self.store.run(op)

    async def delete(self, automation_id: str, actor: str) -> AutomationRecord | None:
        """Remove the automation and its run log; returns what was deleted."""

        def op(db: Database) -> AutomationRecord | None:
            with db.atomic():
                rec = _get(db, automation_id)
                if rec is None:
                    return None
                db.execute("DELETE FROM automation_runs WHERE automation_id = ?", [automation_id])
                db.execute("DELETE FROM automations WHERE id = ?", [automation_id])
                _audit(db, actor, "automation.delete", rec)
                return rec

        return await self.store.run(op)

    async def claim_run(self, automation_id: str, scheduled_for: str, *, late: bool = False,
                        next_run_at: str | None) -> int | None:
        """Claim the firing of `automation_id` at `scheduled_for` and move its schedule on, atomically.

        Returns the new run id, or None when the slot was claimed before or the automation is gone or
        disabled. The row's next run becomes `next_run_at` either way, so a slot that was claimed
        earlier still lets the schedule progress.
        """

        def op(db: Database) -> int | None:
            now = iso(utcnow())
            with db.atomic():
                row = db.execute(
                    "INSERT INTO automation_runs (automation_id, scheduled_for, started_at, status, late, owner,"
                    " lease_until) SELECT id, ?, ?, 'claimed', ?, ?, ? FROM automations WHERE id = ? AND enabled = 1"
                    " ON CONFLICT DO NOTHING RETURNING id",
                    [scheduled_for, now, int(late), self.store.owner, lease_until(self.store.now()),
                     automation_id]).fetchone()
                claimed = int(row[0]) if row is not None else None
                sets = {"next_run_at": next_run_at, "updated_at": now}
                if claimed is not None:
                    sets["last_run_at"] = scheduled_for
                _set(db, automation_id, sets, " AND enabled = 1")
                return claimed

        return await self.store.run(op)

    async def finish_run(self, run_id: int, status: str, output: str | None) -> None:
        await self.store.run(lambda db: db.execute(
            "UPDATE automation_runs SET status = ?, output = ?, finished_at = ? WHERE id = ?",
            [status, output, iso(utcnow()), run_id]))

    async def get_run(self, run_id: int) -> AutomationRun | None:
        def op(db: Database) -> AutomationRun | None:
            rows = db.execute_returning_dicts("SELECT * FROM automation_runs WHERE id = ?", [run_id])
            return row_to(AutomationRun, rows[0]) if rows else None

        return await self.store.run(op)

    async def unfinished_runs(self) -> builtins.list[AutomationRun]:
        """Runs claimed but never finished because their process stopped in between (this process's
        predecessor, a dead one, or one whose lease lapsed), oldest first; each is claimed for this
        process, so a run another live resident is delivering is never run twice."""
        me, now = self.store.owner, self.store.now()

        def op(db: Database) -> builtins.list[AutomationRun]:
            taken = []
            for r in db.execute_returning_dicts("SELECT * FROM automation_runs WHERE status = 'claimed' ORDER BY id"):
                if r["owner"] != me and not takeable(r["owner"], r["lease_until"], me, now):
                    continue
                cur = db.execute("UPDATE automation_runs SET owner = ?, lease_until = ? WHERE id = ?"
                                 " AND status = 'claimed' AND owner IS NOT DISTINCT FROM ?",
                                 [me, lease_until(now), r["id"], r["owner"]])
                if cur.rowcount == 1:
                    taken.append(row_to(AutomationRun, {**r, "owner": me}))
            return taken

        return await self.store.run(op)

    async def prune_runs(self, kept: timedelta, now: datetime | None = None) -> int:
        """Delete finished runs (delivered or failed) started more than `kept` ago; returns how many. A
        claimed run is never deleted: its delivery is still owed. An old slot is never claimed again
        (schedules only move forward), so an old run's row guards nothing."""
        cutoff = iso((now or utcnow()) - kept)
        return await self.store.run(lambda db: int(db.execute(
            "DELETE FROM automation_runs WHERE status <> 'claimed' AND started_at < ?", [cutoff]).rowcount))

    async def history(self, automation_id: str, limit: int = 20) -> builtins.list[AutomationRun]:
        """The most recent runs of one automation, newest first."""
        return await self.store.run(lambda db: [row_to(AutomationRun, r) for r in db.execute_returning_dicts(
            "SELECT * FROM automation_runs WHERE automation_id = ? ORDER BY scheduled_for DESC, id DESC LIMIT ?",
            [automation_id, limit])])
