"""Webhook secrets: one per webhook automation, stored encrypted (the caller encrypts with the vault).

A request to `/hooks/<name>` is checked against the secrets of the enabled automations whose schedule is
`{"type": "webhook", "name": <name>}`. A deleted automation's secret is never matched again (the look-up
joins the automations table), and its id is never reused.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from store.records import iso, utcnow
from store.sql import json_text


class HookTarget(BaseModel):
    """An enabled webhook automation and its secret as stored (encrypted)."""

    automation_id: str
    sealed_secret: str


def m019_webhooks(db: Any) -> None:
    """Per-automation webhook secrets (docs/automations.md, "Webhooks")."""
    db.executescript(
        """
        CREATE TABLE webhook_secrets (
            automation_id TEXT PRIMARY KEY,
            secret TEXT NOT NULL,           -- encrypted with the vault key (gateway/accounts/vault.py)
            created_at TEXT NOT NULL
        );
        """
    )


class WebhookSecrets:
    """The `webhook_secrets` table."""

    def __init__(self, store: Any) -> None:  # a store.db.Store: store.db imports this module's migration
        self.store = store

    async def put(self, automation_id: str, sealed_secret: str) -> None:
        """Set (or replace: a rotation) the automation's secret."""

        def op(db: Any) -> None:
            db.execute("INSERT INTO webhook_secrets (automation_id, secret, created_at) VALUES (?, ?, ?)"
                       " ON CONFLICT (automation_id) DO UPDATE SET secret = excluded.secret,"
                       " created_at = excluded.created_at", [automation_id, sealed_secret, iso(utcnow())])

        await self.store.write(op)

    async def has(self, automation_id: str) -> bool:
        return await self.store.run(lambda db: db.execute(
            "SELECT 1 FROM webhook_secrets WHERE automation_id = ?", [automation_id]).fetchone() is not None)

    async def targets(self, name: str) -> list[HookTarget]:
        """The enabled webhook automations named `name`, with their sealed secrets."""

        def op(db: Any) -> list[HookTarget]:
            rows = db.execute(
                f"SELECT a.id, w.secret FROM automations a JOIN webhook_secrets w ON w.automation_id = a.id"
                f" WHERE a.enabled = 1 AND {json_text(db, 'a.schedule', 'type')} = 'webhook'"
                f" AND {json_text(db, 'a.schedule', 'name')} = ?", [name]).fetchall()
            return [HookTarget(automation_id=r[0], sealed_secret=r[1]) for r in rows]

        return await self.store.run(op)
