"""Budget allowances: the days on which an owner pressed **Allow today** (gateway/services/budget.py).

What was spent is never stored here: it is summed from the usage rows (`store.usage`), the one ledger.
"""

from __future__ import annotations

from typing import Any

from store.records import iso, utcnow


def m020_budget(db: Any) -> None:
    """Days whose caps an owner raised once (docs/budget.md)."""
    db.executescript(
        """
        CREATE TABLE budget_allowances (
            day TEXT PRIMARY KEY,           -- the owner's local date, YYYY-MM-DD
            granted_by TEXT NOT NULL,
            granted_at TEXT NOT NULL
        );
        -- the caps sum a day's and a month's usage rows before every turn: without this, a full scan
        CREATE INDEX messages_created ON messages(created_at);
        """
    )


class BudgetAllowances:
    """The `budget_allowances` table."""

    def __init__(self, store: Any) -> None:  # a store.db.Store: store.db imports this module's migration
        self.store = store

    async def grant(self, day: str, user_key: str) -> bool:
        """Raise `day`'s caps; False when they were raised already (once a day)."""
        return bool(await self.store.write(lambda db: db.execute(
            "INSERT INTO budget_allowances (day, granted_by, granted_at) VALUES (?, ?, ?)"
            " ON CONFLICT (day) DO NOTHING", [day, user_key, iso(utcnow())]).rowcount))

    async def granted(self, day: str) -> bool:
        return await self.store.run(lambda db: db.execute(
            "SELECT 1 FROM budget_allowances WHERE day = ?", [day]).fetchone() is not None)
