"""Session lanes: one turn at a time per conversation.

In one process a lock per session is enough. On a shared store (several residents on PostgreSQL,
docs/scale.md) a webhook update or its redelivery may reach another process, so the lane is also a
named lease (`lane:<session id>`, `store.claims`): a turn waits until it holds it, and releases it when
it ends. A holder that dies mid-turn keeps it until its lease lapses; then another process takes the
turn over (`InboundLog.take_over`) and the lane with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from store.claims import Claims
from store.db import Store

log = logging.getLogger(__name__)

WAIT_FIRST_S, WAIT_MAX_S = 0.05, 0.5  # another process's turn has no event to wait on here: poll, backing off


class Lanes:
    """A lock per session with a turn running or waiting; bounded by those sessions (a lock nobody holds
    or waits for is forgotten, so months of automation runs and helpers, each a session, leave nothing)."""

    def __init__(self, store: Store) -> None:
        self._local: dict[str, tuple[asyncio.Lock, int]] = {}  # session -> its lock, and who holds or waits
        self._claims = Claims(store) if store.shared else None

    @property
    def sessions(self) -> int:
        """Sessions with a lock kept: those with a turn running or waiting."""
        return len(self._local)

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._local.get(session_id) or (asyncio.Lock(), 0)
        self._local[session_id] = (lock, users + 1)
        try:
            async with lock, self._claimed(session_id):
                yield
        finally:
            lock, users = self._local[session_id]
            if users == 1:
                del self._local[session_id]
            else:
                self._local[session_id] = (lock, users - 1)

    @contextlib.asynccontextmanager
    async def _claimed(self, session_id: str) -> AsyncIterator[None]:
        """The lane's lease on a shared store (nothing to claim on a store of one process)."""
        if self._claims is None:
            yield
            return
        name = f"lane:{session_id}"
        wait = WAIT_FIRST_S
        while (holder := await self._claims.take(name)) is not None:
            log.debug("lane_busy session=%s holder=%s", session_id, holder)
            await asyncio.sleep(wait)
            wait = min(WAIT_MAX_S, wait * 2)
        try:
            yield
        finally:
            await self._claims.release(name)
