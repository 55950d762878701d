"""The tables of trigger events and mail watermarks (`store.triggers`), apart from it so the migrations,
which `store.db` runs, do not import the store."""

from __future__ import annotations

from typing import Any


def m018_triggers(db: Any) -> None:
    """Recorded trigger events and per-folder mail watermarks (docs/automations.md, "Triggers")."""
    db.executescript(
        """
        CREATE TABLE trigger_events (
            key TEXT PRIMARY KEY,           -- mail:<account>:<folder>:<uidvalidity>:<uid> | cal:... | hook:...
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,          -- source, fields, text (JSON)
            recorded_at TEXT NOT NULL
        );
        CREATE TABLE mail_watermarks (
            account TEXT NOT NULL,
            folder TEXT NOT NULL,
            uidvalidity BIGINT NOT NULL,
            last_uid BIGINT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (account, folder)
        );
        """
    )
