"""A thread-safe journal that a test in any event loop can wait on: what the local fakes (Slack, speech)
record, each fake in its own thread and loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Journal(Generic[T]):
    """A thread-safe list that a test in any event loop can wait on."""

    def __init__(self) -> None:
        self._items: list[T] = []
        self._lock = threading.Lock()
        self._waiters: list[tuple[Callable[[T], bool], int, asyncio.AbstractEventLoop, asyncio.Future[list[T]]]] = []

    def append(self, item: T) -> None:
        with self._lock:
            self._items.append(item)
            for waiter in list(self._waiters):
                pred, count, loop, fut = waiter
                matches = [i for i in self._items if pred(i)]
                if len(matches) >= count:
                    self._waiters.remove(waiter)
                    loop.call_soon_threadsafe(resolve, fut, matches)

    def items(self, pred: Callable[[T], bool] = lambda _: True) -> list[T]:
        with self._lock:
            return [i for i in self._items if pred(i)]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._waiters.clear()

    async def wait(self, pred: Callable[[T], bool] = lambda _: True, count: int = 1, timeout: float = 30.0) -> list[T]:
        """The matching items once there are at least `count` of them; AssertionError after `timeout`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[T]] = loop.create_future()
        with self._lock:
            matches = [i for i in self._items if pred(i)]
            if len(matches) >= count:
                return matches
            waiter = (pred, count, loop, fut)
            self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AssertionError(f"waited {timeout}s for {count} matching; have {self.items()}") from None
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)


def resolve(fut: asyncio.Future[Any], value: Any) -> None:
    """Set `fut` to `value` unless it is already done (called in the future's own loop)."""
    if not fut.done():
        fut.set_result(value)
