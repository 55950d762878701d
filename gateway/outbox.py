"""Delivery of the outbox: one dispatcher task per surface sends pending rows in order.

Rows are written before anything is sent, so a crash loses nothing: pending rows are delivered at the
next start. Transient failures are retried with backoff (or the platform's Retry-After); permanent
failures mark the row failed. An edit waits for the message it edits to have been delivered.
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import timedelta

from gateway.surfaces.base import DeliveryError, Surface
from store.db import Store
from store.outbox import Outbox
from store.records import Outbound, OutboxItem, iso, utcnow

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 25
MAX_BACKOFF_S = 300.0
IDLE_POLL_S = 3.0


def backoff_s(attempts: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return max(0.0, retry_after)
    return min(MAX_BACKOFF_S, 0.5 * 2 ** attempts) * (0.5 + random.random() / 2)


class OutboxService:
    """Queue messages and deliver them through their surfaces."""

    def __init__(self, store: Store) -> None:
        self.repo = Outbox(store)
        self.surfaces: dict[str, Surface] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Condition()

    async def enqueue(self, outbound: Outbound, dedupe_key: str | None = None) -> int:
        item_id = await self.repo.enqueue(outbound, dedupe_key)
        self.wake(outbound.origin.surface)
        return item_id

    def wake(self, surface: str) -> None:
        event = self._wake.get(surface)
        if event is not None:
            event.set()

    def start(self, surfaces: dict[str, Surface]) -> None:
        """Start one dispatcher per surface (pending rows from before a restart go out first)."""
        self.surfaces = surfaces
        for name, surface in surfaces.items():
            self._wake[name] = asyncio.Event()
            self._wake[name].set()
            self._tasks.append(asyncio.create_task(self._dispatch(name, surface), name=f"outbox-{name}"))

    async def stop(self, flush_timeout_s: float = 5.0) -> None:
        """Give pending deliveries a moment to finish, then stop. Anything left stays pending."""
        try:
            await asyncio.wait_for(self.wait_idle(), flush_timeout_s)
        except asyncio.TimeoutError:
            log.warning("outbox_stop_with_pending")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def wait_idle(self) -> None:
        """Wait until no surface with a running dispatcher has a deliverable row pending."""
        async with self._idle:
            while any([await self.repo.due(name, limit=1) for name in self.surfaces]):
                await self._idle.wait()

    async def _dispatch(self, name: str, surface: Surface) -> None:
        wake = self._wake[name]
        while True:
            wake.clear()
            progressed = False
            try:
                for item in await self.repo.due(name):
                    progressed = await self._deliver(surface, item) or progressed
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one bad row stop delivery for the surface
                log.exception("outbox_dispatch_error surface=%s", name)
            async with self._idle:
                self._idle.notify_all()
            if progressed:
                continue
            # Rows waiting on a retry time are polled every second so retries are not late; otherwise
            # every few seconds, to pick up rows written by another process (the CLI, `anyy chat`).
            timeout = 1.0 if await self.repo.pending_count(name) else IDLE_POLL_S
            try:
                await asyncio.wait_for(wake.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                pass

    async def _deliver(self, surface: Surface, item: OutboxItem) -> bool:
        """Try one row; False when it must wait (an edit whose original is not delivered yet)."""
        edit_id: str | None = None
        if item.outbound.edit_of_outbox_id is not None:
            target = await self.repo.get(item.outbound.edit_of_outbox_id)
            if target is None or target.state == "failed":
                await self.repo.mark_failed(item.id, "the message to edit was never delivered")
                return True
            if target.state == "pending":
                return False  # deliver the original first; this edit stays pending
            edit_id = target.platform_message_id
        try:
            platform_id = await surface.deliver(item, edit_id)
        except DeliveryError as exc:
            if exc.transient and item.attempts + 1 < MAX_ATTEMPTS:
                delay = backoff_s(item.attempts, exc.retry_after)
                await self.repo.mark_retry(item.id, str(exc), iso(utcnow() + timedelta(seconds=delay)))
                log.warning("outbox_retry id=%s surface=%s in_s=%.1f error=%s", item.id, surface.name, delay, exc)
            else:
                await self.repo.mark_failed(item.id, str(exc))
                log.error("outbox_failed id=%s surface=%s error=%s", item.id, surface.name, exc)
            return True
        await self.repo.mark_sent(item.id, platform_id)
        return True
