"""One puller per surface across residents sharing a store: Telegram polling, Slack Socket Mode.

Telegram refuses a second `getUpdates` (409 Conflict) and Slack would hand each event to one of several
sockets at random; either way only one resident may pull. Each resident starts its pulling surfaces
without pulling and runs a `PullLease` per surface: it takes the named lease `poll:<surface>` when it is
free, expired, or its holder is provably gone, and pulls only while it holds it. Every LEASE_S / 3 it
takes the lease again (which renews it); when that fails — another process holds it, or the store cannot
be reached — it stops pulling at once, before its lease could lapse and a second puller begin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.surfaces.base import Surface
from store.claims import Claims
from store.db import Store
from store.leases import LEASE_S

log = logging.getLogger(__name__)


class PullLease:
    def __init__(self, store: Store, surface: Surface, interval_s: float = LEASE_S / 3) -> None:
        self.surface = surface
        self.name = f"poll:{surface.name}"
        self.pulling = False
        self._claims = Claims(store)
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Check once now (pulling at once if the lease is free), then keep checking in the background."""
        await self.check()
        self._task = asyncio.create_task(self._run(), name=f"pull-lease-{self.surface.name}")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            await self.check()

    async def check(self) -> None:
        """Take or renew the lease once; start or stop pulling to match."""
        try:
            holder = await self._claims.take(self.name)
        except Exception as exc:  # cannot renew: stop, rather than pull on a lease that may lapse
            holder = f"unknown ({type(exc).__name__})"
        if holder is None and not self.pulling:
            await self.surface.start_pulling()
            self.pulling = True
            log.info("pull_lease_taken surface=%s", self.surface.name)
        elif holder is not None and self.pulling:
            await self.surface.stop_pulling()
            self.pulling = False
            log.warning("pull_lease_lost surface=%s holder=%s", self.surface.name, holder)

    async def release(self) -> None:
        """Stop pulling and hand the lease back, so another resident takes over at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.pulling:
            await self.surface.stop_pulling()
            self.pulling = False
        with contextlib.suppress(Exception):
            await self._claims.release(self.name)
