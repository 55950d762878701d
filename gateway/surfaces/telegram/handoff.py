"""The intake between PTB's Updater and its Application: a batch of updates is handled concurrently
(in order within each chat) and acknowledged only once all of it has been handled.

PTB's Updater acknowledges Telegram right after it has put the updates of one getUpdates answer on the
queue: the next getUpdates carries an offset past them (in webhook mode the HTTP 200 goes out). With a
plain queue that happens before any handler ran, so a crash in between would lose messages. Here the
`put()` of the last update of a batch waits until the Application has processed the whole batch (the
queue's task accounting, which the Application keeps), so the acknowledgement follows the gateway's
durable `receive` of every update in it. The other `put()`s return at once, so the Application works on
the whole batch together (`ChatOrdered`: one update at a time per chat, chats side by side) instead of
fetching one update, waiting for it, then the next. `PollingBot` tells the queue where a batch ends.
A webhook update is its own batch.

An update whose handling failed makes the last `put()` raise `UpdateNotHandled`: the polling loop backs
off and fetches the same updates again (handled ones come back as duplicates, which the gateway's
dedupe key turns into no-ops); the webhook answers 500 and Telegram redelivers. After `max_attempts`
failures the update is given up on, so one malformed update cannot stall the bot for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from telegram import Update
from telegram.error import NetworkError
from telegram.ext import BaseUpdateProcessor, ExtBot

log = logging.getLogger(__name__)


class UpdateNotHandled(NetworkError):
    """An update was not handled and must not be acknowledged. A NetworkError, so PTB's polling loop
    retries it with backoff instead of ending."""


class HandoffQueue(asyncio.Queue[object]):
    """An update queue whose `put()` of a batch's last update returns when the batch has been handled."""

    def __init__(self, max_attempts: int = 10) -> None:
        super().__init__()
        self.max_attempts = max_attempts
        self._failures: dict[int, int] = {}  # update id -> failed attempts so far
        self._failed_now: set[int] = set()
        self._batch_end: int | None = None  # the last update id of the getUpdates answer being put
        self._batch: list[int] = []  # the update ids of that answer put so far

    def expect(self, updates: Sequence[Update]) -> None:
        """Called with each getUpdates answer before the Updater puts its updates."""
        self._batch_end = updates[-1].update_id if updates else None
        self._batch = []

    def mark_failed(self, update: object) -> None:
        """Called by the Application's error handler for an update whose handling raised."""
        if isinstance(update, Update):
            self._failed_now.add(update.update_id)

    async def put(self, item: object) -> None:
        await super().put(item)
        if not isinstance(item, Update):
            await self.join()
            return
        if self._batch_end is not None:
            self._batch.append(item.update_id)
            if item.update_id != self._batch_end:
                return  # more of the batch follows: let it be handled alongside
            self._batch_end = None
        batch, self._batch = self._batch or [item.update_id], []
        await self.join()
        self._settle(batch)

    def _settle(self, batch: list[int]) -> None:
        """Forget the batch's successes; raise UpdateNotHandled if an update of it failed and may be tried again."""
        retry: list[int] = []
        for update_id in batch:
            if update_id not in self._failed_now:
                self._failures.pop(update_id, None)
                continue
            self._failed_now.discard(update_id)
            attempts = self._failures.get(update_id, 0) + 1
            if attempts >= self.max_attempts:
                self._failures.pop(update_id, None)
                log.error("telegram_update_dropped update=%s attempts=%s", update_id, attempts)
                continue
            self._failures[update_id] = attempts
            retry.append(update_id)
        if retry:
            raise UpdateNotHandled(f"updates {retry} were not handled (attempt {self._failures[retry[0]]})")


class PollingBot(ExtBot[Any]):
    """The Application's bot: tells the handoff queue which updates each getUpdates answer holds."""

    __slots__ = ("_handoff",)

    def __init__(self, handoff: HandoffQueue, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handoff = handoff

    async def get_updates(self, *args: Any, **kwargs: Any) -> tuple[Update, ...]:
        updates = await super().get_updates(*args, **kwargs)
        self._handoff.expect(updates)
        return updates


class ChatOrdered(BaseUpdateProcessor):
    """Handles updates concurrently, but those of one chat one after another in arrival order, so a
    chat's messages reach the gateway (and so its session's lane) in the order they were written."""

    __slots__ = ("_last",)

    def __init__(self, max_concurrent_updates: int) -> None:
        super().__init__(max_concurrent_updates)
        self._last: dict[int | None, asyncio.Future[None]] = {}  # per chat: done when its latest update is

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = update.effective_chat if isinstance(update, Update) else None
        key = chat.id if chat is not None else None
        previous = self._last.get(key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[key] = done
        started = False
        try:
            if previous is not None:
                await asyncio.shield(previous)
            started = True
            await coroutine
        finally:
            if not started and asyncio.iscoroutine(coroutine):
                coroutine.close()  # cancelled while waiting its turn: it never ran
            done.set_result(None)
            if self._last.get(key) is done:
                del self._last[key]

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""
