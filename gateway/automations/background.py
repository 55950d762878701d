"""Tracked background work: tasks that shutdown (and tests) can wait for, never silently dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


class Background:
    """A set of running tasks. `spawn` keeps a reference (asyncio holds tasks only weakly) and `wait`
    returns once none is left, including tasks spawned while waiting."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[None]] = set()

    def spawn(self, coro: Awaitable[None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def idle(self) -> bool:
        return not self._tasks

    async def wait(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every running task and wait until they have ended."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the running tasks, then cancel the rest and wait for them to end."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
