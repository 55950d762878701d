"""Telegram's flood limits, kept on our side: a request waits for its turn instead of being refused.

Telegram allows a bot about 30 messages a second over all chats, one a second into one chat, and 20 a
minute into one group (`[telegram.limits]`, docs/telegram.md). `FloodLimiter` is PTB's rate-limiter hook
(it also keeps the requests under way to the connections there are, so none queues inside the HTTP client's
pool): every request to a chat waits on the bot's rate; a message (anything but a chat action: the
typing sign must never delay the reply it announces) also waits for its chat's spacing, and in a group
for the group's rate. Each chat is paced on its own, so one busy chat never slows the others down.

Should Telegram still answer 429 (another process uses the same token, the limits were set too high),
every request to a chat pauses for the `retry_after` it names. The refused request is sent again after
it, up to `retries` times (none by default); then the RetryAfter reaches the caller, and the outbox
retries the row once `retry_after` has passed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from gateway.config import TelegramLimits
from gateway.surfaces.telegram.delivery import retry_after_s

log = logging.getLogger(__name__)

UNTHROTTLED = frozenset({"sendChatAction"})  # counted against the bot, never against a chat
_PRUNE_AT = 512  # chats with a bucket of their own before idle buckets are dropped


@dataclass
class _Chat:
    """One chat's pacing: its messages one at a time, each no sooner than `next_at` (loop time)."""

    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    next_at: float = 0.0


class FloodLimiter(BaseRateLimiter[int]):
    """Per-bot, per-chat and per-group limits in front of every Bot API request to a chat.

    A chat's messages are spaced by 1 / per_chat_per_s, counted from Telegram's answer to the previous
    one (not from when it was queued: a wait for a connection would bunch them), so Telegram sees them at
    least that far apart; the bot's and a group's requests are spaced evenly at their rates."""

    def __init__(self, limits: TelegramLimits, in_flight: int) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(in_flight)  # requests under way at once: no more than connections
        # No bursts: a burst on top of the rate would put twice the limit into one second (one minute).
        self._bot = AsyncLimiter(1, 1 / limits.per_bot_per_s)
        self._chats: dict[int | str, _Chat] = {}
        self._groups: dict[int | str, AsyncLimiter] = {}
        self._resume_at = 0.0  # loop time before which no request goes to a chat (a 429's retry_after)

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    async def process_request(self, callback: Callable[..., Coroutine[Any, Any, Any]], args: Any,
                              kwargs: dict[str, Any], endpoint: str, data: dict[str, Any],
                              rate_limit_args: int | None) -> Any:
        """Wait for the request's turn, then send it; wait out a 429 and send it again."""
        chat = _chat(data.get("chat_id"))
        if chat is None:  # getMe, setMyCommands, answerCallbackQuery…: not sent to a chat
            return await callback(*args, **kwargs)
        retries = self.limits.retries if rate_limit_args is None else rate_limit_args
        for attempt in range(retries + 1):
            try:
                if endpoint in UNTHROTTLED:
                    return await self._send(None, callback, args, kwargs)
                if _is_group(chat):
                    await self._group(chat).acquire()
                pacing = self._chat_pacing(chat)
                async with pacing.turn:
                    return await self._send(pacing, callback, args, kwargs)
            except RetryAfter as exc:
                self._resume_at = max(self._resume_at, asyncio.get_running_loop().time() + retry_after_s(exc))
                log.warning("telegram_flood_wait method=%s in_s=%.1f attempt=%s", endpoint, retry_after_s(exc),
                            attempt + 1)
                if attempt == retries:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _send(self, pacing: _Chat | None, callback: Callable[..., Coroutine[Any, Any, Any]], args: Any,
                    kwargs: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        if pacing is not None:
            await _until(pacing.next_at)
        async with self._slots:
            await self._bot.acquire()
            while self._resume_at > loop.time():  # a 429 holds every chat (it may be extended meanwhile)
                await asyncio.sleep(self._resume_at - loop.time())
            try:
                return await callback(*args, **kwargs)
            finally:  # from the answer: the next message arrives at least the spacing after this one did
                if pacing is not None:
                    pacing.next_at = loop.time() + 1 / self.limits.per_chat_per_s

    def _chat_pacing(self, chat: int | str) -> _Chat:
        if len(self._chats) > _PRUNE_AT:  # forget chats that could send now anyway
            now = asyncio.get_running_loop().time()
            for key in [k for k, c in self._chats.items() if c.next_at <= now and not c.turn.locked()]:
                del self._chats[key]
        return self._chats.setdefault(chat, _Chat())

    def _group(self, chat: int | str) -> AsyncLimiter:
        if len(self._groups) > _PRUNE_AT:  # forget groups whose bucket has drained: they start afresh
            for key in [k for k, b in self._groups.items() if k != chat and b.has_capacity(b.max_rate)]:
                del self._groups[key]
        bucket = self._groups.get(chat)
        if bucket is None:
            bucket = self._groups[chat] = AsyncLimiter(1, 60 / self.limits.per_group_per_min)
        return bucket


async def _until(at: float) -> None:
    """Sleep until loop time `at`."""
    loop = asyncio.get_running_loop()
    while (left := at - loop.time()) > 0:
        await asyncio.sleep(left)


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
