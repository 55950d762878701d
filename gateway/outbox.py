"""Delivery of the outbox: one dispatcher task per surface hands pending rows to one lane per chat.

Rows are written before anything is sent, so a crash loses nothing: pending rows are delivered at the
next start. Transient failures are retried with backoff (or the platform's Retry-After); permanent
failures mark the row failed. An edit waits for the message it edits to have been delivered. A row that
was delivered and then rewritten (a streamed reply, `put`) is delivered as an edit of its own message.

A chat's rows go out one after another in row order (its lane); different chats' lanes run side by side,
so one slow or rate-limited chat never holds up the others, and a backlog over many chats drains as fast
as the platform allows (the platform's own pacing is the surface's: Telegram's `FloodLimiter`). A row is
in at most one lane at a time; the dispatcher fetches more while fewer than `MAX_IN_FLIGHT` are.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from gateway import checkpoints
from gateway.surfaces.base import DeliveryError, Surface
from store.db import Store
from store.outbox import Outbox
from store.records import Outbound, OutboxItem, iso, utcnow

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 25
MAX_BACKOFF_S = 300.0
IDLE_POLL_S = 3.0
BATCH = 50
MAX_IN_FLIGHT = 128  # rows handed to lanes and not yet delivered, per surface
COALESCE_S = 0.01


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
        self._settled: dict[str, bool] = {}  # the last pass found nothing more it could deliver
        self._retrying: dict[str, set[int]] = {}  # rows waiting on a retry time, per surface
        self._sending: dict[str, set[int]] = {}  # rows `due` marked as being sent, not yet tried, per surface
        self._asked: dict[str, bool] = {}  # `wake` was called since the dispatcher last looked
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Condition()

    async def enqueue(self, outbound: Outbound, dedupe_key: str | None = None) -> int:
        try:
            return await self.repo.enqueue(outbound, dedupe_key)
        finally:  # as in `put`
            self.wake(outbound.origin.surface)

    async def put(self, outbound: Outbound, dedupe_key: str, along: Callable[[Any], None] | None = None) -> int:
        """Write (or rewrite) the row for `dedupe_key` and deliver it: sent, or edited if it was sent.
        `along(db)` is written in the same transaction (`Outbox.put`)."""
        try:
            return await self.repo.put(outbound, dedupe_key, along)
        finally:  # a caller cancelled mid-write too: the row may have been written, so look for it now
            self.wake(outbound.origin.surface)

    def wake(self, surface: str) -> None:
        event = self._wake.get(surface)
        if event is not None:
            self._asked[surface] = True
            event.set()

    def start(self, surfaces: dict[str, Surface]) -> None:
        """Start one dispatcher per surface (pending rows from before a restart go out first)."""
        self.surfaces = surfaces
        for name, surface in surfaces.items():
            self._wake[name] = asyncio.Event()
            self._wake[name].set()
            self._settled[name] = False
            self._retrying[name] = set()
            self._sending[name] = set()
            self._asked[name] = False
            self._tasks.append(asyncio.create_task(self._dispatch(name, surface), name=f"outbox-{name}"))

    async def stop(self, flush_timeout_s: float = 5.0) -> None:
        """Give pending deliveries a moment to finish, then stop. Anything left stays pending."""
        try:
            await asyncio.wait_for(self.wait_idle(), flush_timeout_s)
        except TimeoutError:
            log.warning("outbox_stop_with_pending")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _idle(self) -> bool:
        return all(self._settled[n] and not self._wake[n].is_set() for n in self.surfaces)

    async def wait_idle(self) -> None:
        """Wait until every dispatcher has delivered all it can (rows waiting on a retry time or on the
        message they edit are not waited for)."""
        async with self._changed:
            await self._changed.wait_for(self._idle)

    async def delivered(self, item_id: int, timeout_s: float = 120.0) -> None:
        """Wait until the row has left `pending` (sent or failed), or `timeout_s` has passed."""
        async def settled() -> bool:
            item = await self.repo.get(item_id)
            # a surface that is not running here (another process delivers it) is not waited for
            return item is None or item.state != "pending" or item.outbound.origin.surface not in self.surfaces

        try:
            async with asyncio.timeout(timeout_s):
                while not await settled():
                    async with self._changed:
                        await self._changed.wait()
        except TimeoutError:
            log.info("outbox_wait_timeout id=%s", item_id)

    async def _dispatch(self, name: str, surface: Surface) -> None:
        wake = self._wake[name]
        lanes = _Lanes(functools.partial(self._deliver_one, surface), wake)
        look = True  # pending rows from before a restart
        try:
            while True:
                wake.clear()
                # A lane that delivered all it was given wakes this loop only to settle: the store is asked
                # again only when rows may be waiting (written since, left pending, rewritten, or a poll).
                look = look or self._asked[name] or lanes.look
                self._asked[name] = lanes.look = False
                self._settled[name] = False
                more = False
                try:
                    if look and lanes.in_flight:
                        # While lanes are busy, let the rows written in the next moment arrive and fetch
                        # them in one query.
                        await asyncio.sleep(COALESCE_S)
                    if look and lanes.room:
                        # Rows in lanes are still pending, so they are read again (not parsed again unless
                        # rewritten): ask for that many more.
                        look = False
                        limit = min(BATCH, lanes.room) + lanes.in_flight
                        due = await self.repo.due_except(name, limit, dict(lanes.handed), lanes.busy)
                        self._sending[name] |= due.sending
                        more = lanes.take(due.items) and due.read == limit
                except asyncio.CancelledError:
                    raise
                except Exception:  # never let one bad row stop delivery for the surface
                    log.exception("outbox_dispatch_error surface=%s", name)
                if wake.is_set() or (more and lanes.room > 0):
                    look = look or (more and lanes.room > 0)
                    continue  # new rows arrived meanwhile, or there are more than one batch
                if not lanes.in_flight:
                    self._settled[name] = True
                    async with self._changed:
                        self._changed.notify_all()
                # Rows waiting on a retry time are polled every second so retries are not late; otherwise
                # every few seconds, to pick up rows written by another process (the CLI, `anyy chat`).
                timeout = 1.0 if self._retrying[name] else IDLE_POLL_S
                try:
                    async with asyncio.timeout(timeout):  # no task per wait, as wait_for makes one
                        await wake.wait()
                except TimeoutError:
                    look = True
        finally:
            await lanes.cancel()

    async def _deliver_one(self, surface: Surface, item: OutboxItem) -> bool:
        """`_deliver`; False when the row may still be pending (the dispatcher looks again)."""
        settled = False
        try:
            settled = await self._deliver(surface, item)
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one bad row stop delivery for the chat
            log.exception("outbox_deliver_error surface=%s id=%s", surface.name, item.id)
        async with self._changed:  # `delivered()` looks again
            self._changed.notify_all()
        return settled

    async def _deliver(self, surface: Surface, item: OutboxItem) -> bool:
        """Try one row: deliver it, schedule a retry, fail it, or leave an edit waiting for its original.
        True when it was delivered or failed."""
        retrying = self._retrying[surface.name]
        edit_id = item.platform_message_id  # set on a row rewritten after its delivery: edit what it sent
        if item.outbound.edit_of_outbox_id is not None:
            target = await self.repo.get(item.outbound.edit_of_outbox_id)
            if target is None or target.state == "failed":
                await self.repo.mark_failed(item.id, "the message to edit was never delivered")
                return True
            if target.state == "pending":
                return False  # deliver the original first; this edit stays pending
            edit_id = target.platform_message_id
        marked = item.id in self._sending[surface.name]  # marked with the query that found it
        self._sending[surface.name].discard(item.id)
        if edit_id is None and not marked:  # a new message: a crash from here until its outcome is recorded
            await self.repo.mark_sending(item.id)  # leaves it in doubt
        await checkpoints.reached("outbox.before_send")
        try:
            platform_id = await surface.deliver(item, edit_id)
        except DeliveryError as exc:
            if exc.transient and item.attempts + 1 < MAX_ATTEMPTS:
                delay = backoff_s(item.attempts, exc.retry_after)
                # A new message whose send got no answer stays in doubt, so the retry looks before it posts.
                await self.repo.mark_retry(item.id, str(exc), iso(utcnow() + timedelta(seconds=delay)),
                                           in_doubt=edit_id is None and exc.in_doubt)
                retrying.add(item.id)
                log.warning("outbox_retry id=%s surface=%s in_s=%.1f error=%s", item.id, surface.name, delay, exc)
                return False
            await self.repo.mark_failed(item.id, str(exc))
            retrying.discard(item.id)
            log.error("outbox_failed id=%s surface=%s error=%s", item.id, surface.name, exc)
            return True
        await self.repo.mark_sent(item.id, platform_id, item.revision)
        retrying.discard(item.id)
        return True


class _Lanes:
    """One surface's chat lanes: a task per chat with rows to deliver, taking them in row order."""

    def __init__(self, deliver: Callable[[OutboxItem], Awaitable[bool]], wake: asyncio.Event) -> None:
        self.deliver = deliver
        self.wake = wake
        self._queued: dict[str, deque[OutboxItem]] = {}  # per chat: rows handed over, not yet delivered
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._revisions: dict[int, int] = {}  # every row in a lane: the revision handed over
        self._stale = False  # a row in a lane was rewritten meanwhile: look again once its lane is done
        self._unsettled = False  # a row was left pending (a retry, an edit waiting): look again, too
        self.look = False  # the dispatcher should ask the store again (set with `wake`; it clears it)

    @property
    def in_flight(self) -> int:
        return len(self._revisions)

    @property
    def handed(self) -> Mapping[int, int]:
        """Every row in a lane: the revision handed over."""
        return self._revisions

    @property
    def busy(self) -> frozenset[str]:
        """The chat ids whose lanes are delivering (one surface's dispatcher: the chat id is the key)."""
        return frozenset(chat.split(":", 1)[1] for chat in self._tasks)

    @property
    def room(self) -> int:
        return max(0, MAX_IN_FLIGHT - len(self._revisions))

    def take(self, items: list[OutboxItem]) -> bool:
        """Hand the rows not in a lane yet to their chats' lanes (in the order given); False if none was new."""
        new = []
        for item in items:
            handed = self._revisions.get(item.id)
            if handed is None:
                new.append(item)
            elif handed != item.revision:
                self._stale = True
        for item in new:
            chat = f"{item.outbound.origin.surface}:{item.outbound.origin.chat_id}"
            self._revisions[item.id] = item.revision
            self._queued.setdefault(chat, deque()).append(item)
            if chat not in self._tasks:
                self._tasks[chat] = asyncio.create_task(self._run(chat), name=f"outbox-lane-{chat}")
        return bool(new)

    async def _run(self, chat: str) -> None:
        queue = self._queued[chat]
        try:
            while queue:
                item = queue[0]
                if not await self.deliver(item):
                    self._unsettled = True
                queue.popleft()
                del self._revisions[item.id]
                if len(self._revisions) == MAX_IN_FLIGHT - 1:
                    self.look = True  # room again: the dispatcher was waiting for it
                    self.wake.set()
        finally:
            for item in queue:
                self._revisions.pop(item.id, None)
            del self._queued[chat], self._tasks[chat]
            if self._stale or not self._tasks:  # a rewritten row to deliver again, or all done: settle
                self.look = self.look or self._stale or self._unsettled or bool(queue)
                self._stale = self._unsettled = False
                self.wake.set()

    async def cancel(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
