"""Approval rows and their atomic state transitions. Every transition writes an audit event."""

from __future__ import annotations

import builtins  # inside `Approvals`, `list` is its method: its annotations name builtins.list
from typing import Any

from store.audit import add_audit
from store.db import Store
from store.leases import takeable
from store.outbox import add_outbound
from store.records import ApprovalRecord, ApprovalState, AuditEvent, Outbound, dumps, iso, row_to, utcnow
from store.sql import lock
from store.tables import Database

_JSON = ("origin", "deciders", "prompt_refs")


def _record(row: dict) -> ApprovalRecord:
    return row_to(ApprovalRecord, row, _JSON)


def _for_call(db: Database, session_id: str, turn_id: str | None, tool_call_id: str) -> ApprovalRecord | None:
    rows = db.execute_returning_dicts(
        "SELECT * FROM approvals WHERE session_id = ? AND turn_id IS NOT DISTINCT FROM ? AND tool_call_id = ?",
        [session_id, turn_id, tool_call_id])
    return _record(rows[0]) if rows else None


class Approvals:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, rec: ApprovalRecord, prompt: Outbound) -> tuple[ApprovalRecord, bool]:
        """Store the approval and its prompt message in one transaction. When an approval for the same
        call (session, turn, tool call id) exists already — a turn re-run after a crash reached the
        same held call — nothing is written and that one is returned. Returns (record, created)."""

        def op(db: Database) -> tuple[ApprovalRecord, bool]:
            with db.atomic():  # the lock: two processes re-running one turn write one approval
                lock(db, f"approval:{rec.session_id}:{rec.turn_id}:{rec.tool_call_id}")
                existing = _for_call(db, rec.session_id, rec.turn_id, rec.tool_call_id)
                if existing is not None:
                    return existing, False
                outbox_id = add_outbound(db, prompt, f"approval:{rec.id}:prompt")
                stored = rec.model_copy(update={"prompt_refs": [*rec.prompt_refs, outbox_id]})
                row = stored.model_dump()
                row["origin"] = stored.origin.model_dump_json()
                row["deciders"] = dumps(stored.deciders)
                row["prompt_refs"] = dumps(stored.prompt_refs)
                db["approvals"].insert(row)
                add_audit(db, AuditEvent(actor=rec.requester, action="approval.pending", tool=rec.tool,
                                         args_sha256=rec.args_sha256, subject=rec.id, session_id=rec.session_id))
                return stored, True

        return await self.store.run(op)

    async def for_call(self, session_id: str, turn_id: str | None, tool_call_id: str) -> ApprovalRecord | None:
        """The approval holding this tool call, if there is one."""
        return await self.store.run(lambda db: _for_call(db, session_id, turn_id, tool_call_id))

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        def op(db: Database) -> ApprovalRecord | None:
            rows = db.execute_returning_dicts("SELECT * FROM approvals WHERE id = ?", [approval_id])
            return _record(rows[0]) if rows else None

        return await self.store.run(op)

    async def transition(
        self, approval_id: str, from_states: tuple[ApprovalState, ...], to: ApprovalState, actor: str,
        **fields: Any,
    ) -> ApprovalRecord | None:
        """Move the approval to `to` if and only if it is in one of `from_states`, as one conditional
        UPDATE. Returns the updated record, or None when another decision got there first."""

        def op(db: Database) -> ApprovalRecord | None:
            sets = {"state": to, **fields}
            marks = ", ".join(f"{k} = ?" for k in sets)
            with db.atomic():
                cur = db.execute(
                    f"UPDATE approvals SET {marks} WHERE id = ? AND state IN ({', '.join('?' for _ in from_states)})",
                    [*sets.values(), approval_id, *from_states],
                )
                if cur.rowcount != 1:
                    return None
                rec = _record(db.execute_returning_dicts("SELECT * FROM approvals WHERE id = ?", [approval_id])[0])
                add_audit(db, AuditEvent(actor=actor, action=f"approval.{to}", tool=rec.tool,
                                         args_sha256=rec.args_sha256, subject=rec.id, session_id=rec.session_id,
                                         detail={k: v for k, v in fields.items() if k in ("reason", "result")}))
                return rec

        return await self.store.run(op)

    async def list(self, states: tuple[str, ...] | None = ("pending",), requester: str | None = None,
                   limit: int = 100) -> list[ApprovalRecord]:
        def op(db: Database) -> list[ApprovalRecord]:
            where, args = ["1 = 1"], []
            if states:
                where.append(f"state IN ({', '.join('?' for _ in states)})")
                args += list(states)
            if requester:
                where.append("requester = ?")
                args.append(requester)
            rows = db.execute_returning_dicts(
                f"SELECT * FROM approvals WHERE {' AND '.join(where)} ORDER BY created_at DESC LIMIT ?",
                [*args, limit])
            return [_record(r) for r in rows]

        return await self.store.run(op)

    async def due_to_expire(self) -> builtins.list[str]:
        return await self.store.run(lambda db: [r[0] for r in db.execute(
            "SELECT id FROM approvals WHERE state = 'pending' AND expires_at <= ?", [iso(utcnow())]).fetchall()])

    async def stranded(self) -> builtins.list[str]:
        """Ids of executing approvals whose executor has stopped (`store.leases.takeable`)."""
        rows = await self.store.run(lambda db: db.execute(
            "SELECT id, owner, lease_until FROM approvals WHERE state = 'executing'").fetchall())
        me, now = self.store.owner, self.store.now()
        return [r[0] for r in rows if takeable(r[1], r[2], me, now)]

    async def ids_in_state(self, state: ApprovalState) -> builtins.list[str]:
        return await self.store.run(lambda db: [r[0] for r in db.execute(
            "SELECT id FROM approvals WHERE state = ?", [state]).fetchall()])
