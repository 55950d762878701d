"""The queue between PTB's Updater and its Application, changed so an update is acknowledged only once
it has been handled.

PTB's Updater acknowledges Telegram right after it has put an update on this queue: in polling mode the
next getUpdates carries an offset past it, in webhook mode the HTTP 200 goes out. With a plain queue
that happens before any handler ran, so a crash in between would lose the message. Here `put()` waits
until the Application has processed the update (the queue's task accounting, which the Application
keeps), so the acknowledgement follows the gateway's durable `receive`.

An update whose handling failed raises `UpdateNotHandled` from `put()`: the polling loop backs off and
fetches the same updates again (handled ones come back as duplicates, which the gateway's dedupe key
turns into no-ops); the webhook answers 500 and Telegram redelivers. After `max_attempts` failures the
update is given up on, so one malformed update cannot stall the bot for good.
"""

from __future__ import annotations

import asyncio
import logging

from telegram import Update
from telegram.error import NetworkError

log = logging.getLogger(__name__)


class UpdateNotHandled(NetworkError):
    """An update was not handled and must not be acknowledged. A NetworkError, so PTB's polling loop
    retries it with backoff instead of ending."""


class HandoffQueue(asyncio.Queue[object]):
    """An update queue whose `put()` returns when the update has been handled."""

    def __init__(self, max_attempts: int = 10) -> None:
        super().__init__()
        self.max_attempts = max_attempts
        self._failures: dict[int, int] = {}
        self._failed_now: set[int] = set()

    def mark_failed(self, update: object) -> None:
        """Called by the Application's error handler for an update whose handling raised."""
        if isinstance(update, Update):
            self._failed_now.add(update.update_id)

    async def put(self, item: object) -> None:
        await super().put(item)
        await self.join()
        if not isinstance(item, Update) or item.update_id not in self._failed_now:
            if isinstance(item, Update):
                self._failures.pop(item.update_id, None)
            return
        self._failed_now.discard(item.update_id)
        attempts = self._failures.get(item.update_id, 0) + 1
        if attempts >= self.max_attempts:
            self._failures.pop(item.update_id, None)
            log.error("telegram_update_dropped update=%s attempts=%s", item.update_id, attempts)
            return
        self._failures[item.update_id] = attempts
        raise UpdateNotHandled(f"update {item.update_id} was not handled (attempt {attempts})")
