"""Email drafts, per user: the full outgoing message as JSON, and whether it has been sent.

A draft changes only while it is a draft; `claim` is the single atomic transition out of that state,
conditional on the message the sender was approved to send, so two sends of one draft cannot both claim
it and a revised draft cannot be sent under an approval of its earlier text.
"""

from __future__ import annotations

import secrets
from typing import Any

from store.db import Store
from store.records import EmailDraftRecord, dumps, iso, row_to, utcnow
from store.tables import Database


class Drafts:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, user_key: str, message: dict[str, Any]) -> EmailDraftRecord:
        """Store a new draft and return it (its id is short enough to read out in a chat)."""

        def op(db: Database) -> EmailDraftRecord:
            now = iso(utcnow())
            row = {"id": f"d{secrets.token_hex(5)}", "user_key": user_key, "message": dumps(message),
                   "state": "draft", "created_at": now, "updated_at": now}
            db["email_drafts"].insert(row)
            return row_to(EmailDraftRecord, row, ("message",))

        return await self.store.run(op)

    async def get(self, user_key: str, draft_id: str) -> EmailDraftRecord | None:
        """One of the user's drafts, in any state; None when it is missing or someone else's."""

        def op(db: Database) -> EmailDraftRecord | None:
            rows = list(db["email_drafts"].rows_where("id = ? AND user_key = ?", [draft_id, user_key]))
            return row_to(EmailDraftRecord, rows[0], ("message",)) if rows else None

        return await self.store.run(op)

    async def update(self, user_key: str, draft_id: str, message: dict[str, Any]) -> EmailDraftRecord | None:
        """Replace the message of an unsent draft; None when there is no such unsent draft of this user."""

        def op(db: Database) -> EmailDraftRecord | None:
            cur = db.execute(
                "UPDATE email_drafts SET message = ?, updated_at = ? WHERE id = ? AND user_key = ? AND state = 'draft'",
                [dumps(message), iso(utcnow()), draft_id, user_key])
            return row_to(EmailDraftRecord, db["email_drafts"].get(draft_id), ("message",)) if cur.rowcount else None

        return await self.store.run(op)

    async def _transition(self, user_key: str, draft_id: str, old: str, new: str) -> bool:
        def op(db: Database) -> bool:
            cur = db.execute(
                "UPDATE email_drafts SET state = ?, updated_at = ? WHERE id = ? AND user_key = ? AND state = ?",
                [new, iso(utcnow()), draft_id, user_key, old])
            return cur.rowcount == 1

        return await self.store.run(op)

    async def claim(self, user_key: str, draft_id: str, message: dict[str, Any]) -> bool:
        """Atomically move an unsent draft to `sent` if and only if it still holds exactly `message` (the
        one the owner approved); False otherwise. Call it before handing the message to the server:
        whoever wins this transition is the one sender, and a draft revised meanwhile is not sent."""

        def op(db: Database) -> bool:
            cur = db.execute(
                "UPDATE email_drafts SET state = 'sent', updated_at = ? WHERE id = ? AND user_key = ?"
                " AND state = 'draft' AND message = ?", [iso(utcnow()), draft_id, user_key, dumps(message)])
            return cur.rowcount == 1

        return await self.store.run(op)

    async def unmark_sent(self, user_key: str, draft_id: str) -> bool:
        """Undo `mark_sent` after the server refused the message, so it can be fixed and sent again."""
        return await self._transition(user_key, draft_id, "sent", "draft")
