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
from collections import defaultdict
from collections.abc import AsyncIterator

from store.claims import Claims
from store.db import Store

log = logging.getLogger(__name__)

WAIT_FIRST_S, WAIT_MAX_S = 0.05, 0.5  # another process's turn has no event to wait on here: poll, backing off


class Lanes:
    def __init__(self, store: Store) -> None:
        self._local: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._claims = Claims(store) if store.shared else None

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        async with self._local[session_id]:
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
