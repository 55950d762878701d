"""Telegram's flood limits, kept on our side: a request waits for its turn instead of being refused.

Telegram allows a bot about 30 messages a second over all chats, one a second into one chat, and 20 a
minute into one group (`[telegram.limits]`, docs/telegram.md). `FloodLimiter` is PTB's rate-limiter hook (it also keeps the
requests under way to the connections there are, so none queues inside httpcore's pool):
every request to a chat waits on the bot's leaky bucket; a message (anything but a chat action: the
typing sign must never delay the reply it announces) also waits on its chat's, and in a group on the
group's. Each chat has its own bucket, so one busy chat never slows the others down.

Should Telegram still answer 429 (another process uses the same token, the limits were set too high),
every request to a chat pauses for the `retry_after` it names. The refused request is sent again after
it, up to `retries` times (none by default); then the RetryAfter reaches the caller, and the outbox
retries the row once `retry_after` has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from gateway.config import TelegramLimits
from gateway.surfaces.telegram.delivery import retry_after_s

log = logging.getLogger(__name__)

UNTHROTTLED = frozenset({"sendChatAction"})  # counted against the bot, never against a chat
_PRUNE_AT = 512  # chats with a bucket of their own before idle buckets are dropped


class FloodLimiter(BaseRateLimiter[int]):
    """Per-bot, per-chat and per-group leaky buckets in front of every Bot API request to a chat."""

    def __init__(self, limits: TelegramLimits, in_flight: int) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(in_flight)  # requests under way at once: no more than connections
        self._bot = AsyncLimiter(limits.per_bot_per_s, 1)
        self._chats: dict[int | str, AsyncLimiter] = {}
        self._groups: dict[int | str, AsyncLimiter] = {}
        self._resume_at = 0.0  # loop time before which no request goes to a chat (a 429's retry_after)

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    async def process_request(self, callback: Callable[..., Coroutine[Any, Any, Any]], args: Any,
                              kwargs: dict[str, Any], endpoint: str, data: dict[str, Any],
                              rate_limit_args: int | None) -> Any:
        """Wait for the request's turn in its buckets, then send it; wait out a 429 and send it again."""
        chat = _chat(data.get("chat_id"))
        if chat is None:  # getMe, setMyCommands, answerCallbackQuery…: not sent to a chat
            return await callback(*args, **kwargs)
        retries = self.limits.retries if rate_limit_args is None else rate_limit_args
        for attempt in range(retries + 1):
            async with contextlib.AsyncExitStack() as buckets:
                if endpoint not in UNTHROTTLED:
                    if _is_group(chat):
                        await buckets.enter_async_context(self._bucket(self._groups, chat, self.limits.per_group_per_min, 60))
                    await buckets.enter_async_context(self._bucket(self._chats, chat, self.limits.per_chat_per_s, 1))
                await buckets.enter_async_context(self._bot)
                await self._paused()
                await buckets.enter_async_context(self._slots)
                try:
                    return await callback(*args, **kwargs)
                except RetryAfter as exc:
                    self._pause(retry_after_s(exc))
                    log.warning("telegram_flood_wait method=%s in_s=%.1f attempt=%s", endpoint, retry_after_s(exc),
                                attempt + 1)
                    if attempt == retries:
                        raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pause(self, seconds: float) -> None:
        """Hold every request to a chat for `seconds` (Telegram does not say which limit was hit)."""
        self._resume_at = max(self._resume_at, asyncio.get_running_loop().time() + seconds)

    async def _paused(self) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._resume_at - loop.time()) > 0:
            await asyncio.sleep(left)

    @staticmethod
    def _bucket(buckets: dict[int | str, AsyncLimiter], chat: int | str, rate: float, period: float) -> AsyncLimiter:
        if len(buckets) > _PRUNE_AT:  # forget chats whose bucket has drained: they start afresh
            for key in [k for k, b in buckets.items() if k != chat and b.has_capacity(b.max_rate)]:
                del buckets[key]
        bucket = buckets.get(chat)
        if bucket is None:
            bucket = buckets[chat] = AsyncLimiter(rate, period)
        return bucket


def _chat(value: object) -> int | str | None:
    """The chat a request goes to: an int id, or an @username (groups and channels) as given."""
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return str(value)


def _is_group(chat: int | str) -> bool:
    """Groups, supergroups and channels have negative ids; an @username names one of them too."""
    return isinstance(chat, str) or chat < 0
