"""Inbound durability: seen platform ids (redelivery is a no-op) and the queue of accepted messages.

A surface records an inbound here before acknowledging the platform; the runtime marks it done when
its turn has finished. A pending row is owned by the process that accepted it, under a lease it renews
(`store.leases`); recovery takes over only pending rows whose owner has stopped, and runs them again.
"""

from __future__ import annotations

from store.db import Store
from store.leases import lease_until, takeable
from store.records import Inbound, iso, utcnow
from store.sql import json_text
from store.tables import Database


class InboundLog:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def accept(self, inbound: Inbound, key: str | None) -> int | None:
        """Record the inbound; returns its queue id, or None when `key` was seen before (a redelivery)."""

        def op(db: Database) -> int | None:
            now = iso(utcnow())
            if key is not None:  # two processes given one redelivered update: one row wins
                cur = db.execute("INSERT INTO seen_inbound (key, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                 [key, now])
                if cur.rowcount == 0:
                    return None
            return int(db.execute(
                "INSERT INTO inbound_queue (key, payload, state, created_at, owner, lease_until)"
                " VALUES (?, ?, 'pending', ?, ?, ?) RETURNING id",
                [key, inbound.model_dump_json(), now, self.store.owner, lease_until(self.store.now())],
            ).fetchone()[0])

        # A getUpdates answer's inbounds are accepted together: one transaction (`Store.write`).
        return await self.store.write(op)

    async def seen(self, key: str) -> bool:
        return await self.store.run(
            lambda db: db.execute("SELECT 1 FROM seen_inbound WHERE key = ?", [key]).fetchone() is not None
        )

    async def done(self, queue_id: int) -> None:
        await self.store.run(lambda db: mark_done(db, queue_id))

    async def take_over(self) -> list[tuple[int, Inbound]]:
        """Claim the pending inbounds whose owner has stopped (see `store.leases.takeable`) for this
        process, and return them; work a live process owns is left alone."""

        def op(db: Database) -> list[tuple[int, Inbound]]:
            rows = db.execute("SELECT id, payload, owner, lease_until FROM inbound_queue"
                              " WHERE state = 'pending' ORDER BY id").fetchall()
            taken = []
            me, now = self.store.owner, self.store.now()
            for queue_id, payload, owner, until in rows:
                if not takeable(owner, until, me, now):
                    continue
                cur = db.execute(  # conditional on the owner we saw: two recoverers cannot both win
                    "UPDATE inbound_queue SET owner = ?, lease_until = ? WHERE id = ? AND state = 'pending'"
                    " AND owner IS NOT DISTINCT FROM ?", [me, lease_until(now), queue_id, owner])
                if cur.rowcount == 1:
                    taken.append((queue_id, Inbound.model_validate_json(payload)))
            return taken

        return await self.store.run(op)

    async def last_by_surface(self) -> dict[str, str]:
        """When each surface last handed over a message (ISO UTC): its "last event"."""
        return await self.store.run(lambda db: {r[0]: r[1] for r in db.execute(
            f"SELECT {json_text(db, 'payload', 'surface')} AS surface, max(created_at) FROM inbound_queue"
            " GROUP BY 1")})


def mark_done(db: Database, queue_id: int) -> None:
    """`InboundLog.done` on the store thread, for a caller writing it in its own transaction (a turn's
    reply)."""
    db.execute("UPDATE inbound_queue SET state = 'done' WHERE id = ?", [queue_id])
