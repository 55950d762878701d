"""Named leases (the `leases` table): one holder at a time across every process on the store.

`lane:<session id>` keeps a conversation's turns from overlapping when several residents share the
database; `poll:<surface>` lets one of them poll a platform (a second `getUpdates` would be refused).
A holder renews its leases with the rest of its work (`Store.renew`); a lease whose holder stopped
renewing lapses after `store.leases.LEASE_S`, or at once when the holder is provably gone.
"""

from __future__ import annotations

from store.db import Store
from store.leases import release_lease, take_lease
from store.records import iso


class Claims:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def take(self, name: str) -> str | None:
        """Take (or keep) the lease `name` for this store's owner; None when held now, else the holder."""
        return await self.store.run(lambda db: take_lease(db, name, self.store.owner, self.store.now()))

    async def release(self, name: str) -> None:
        await self.store.run(lambda db: release_lease(db, name, self.store.owner))

    async def holder(self, name: str) -> str | None:
        """Who holds `name` under a lease that has not lapsed, if anyone."""
        row = await self.store.run(lambda db: db.execute(
            "SELECT owner FROM leases WHERE name = ? AND lease_until > ?", [name, iso(self.store.now())]).fetchone())
        return str(row[0]) if row else None
