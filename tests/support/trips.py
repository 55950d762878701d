"""Store round trips by the task that asked for them, counted on the real Store.

Every `Store.run` is one round trip to the store's thread. A write or read queued while another is on
its way goes in the next batch, run by the batcher's own task: so a trip is counted for the task whose
call it carried, whichever task made it (`Trips.of`). Install before the Store is made: its batcher
holds the `run` it was made with.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest

from store.db import Store


class Trips:
    """(task, trip number) for every trip a task's store call went on."""

    def __init__(self) -> None:
        self.seen: set[tuple[asyncio.Task[Any] | None, int]] = set()
        self._lock = threading.Lock()  # the store's thread adds while the loop counts
        self._numbers = itertools.count(1)
        self._on_thread = threading.local()  # the trip the store's thread is running

    def of(self, task: asyncio.Task[Any] | None) -> int:
        """How many round trips carried `task`'s store calls so far."""
        with self._lock:
            return len({n for t, n in self.seen if t is task})

    def _add(self, task: asyncio.Task[Any] | None, number: int) -> None:
        with self._lock:
            self.seen.add((task, number))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        run, write, read = Store.run, Store.write, Store.read
        trips = self

        async def counted_run(store: Store, fn: Callable[[Any], Any]) -> Any:
            number = next(trips._numbers)
            trips._add(asyncio.current_task(), number)

            def on_thread(db: Any) -> Any:
                trips._on_thread.number = number
                return fn(db)

            return await run(store, on_thread)

        def tagged(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            task = asyncio.current_task()

            def op(db: Any) -> Any:
                trips._add(task, trips._on_thread.number)
                return fn(db)

            return op

        async def counted_write(store: Store, fn: Callable[[Any], Any]) -> Any:
            return await write(store, tagged(fn))

        async def counted_read(store: Store, fn: Callable[[Any], Any]) -> Any:
            return await read(store, tagged(fn))

        monkeypatch.setattr(Store, "run", counted_run)
        monkeypatch.setattr(Store, "write", counted_write)
        monkeypatch.setattr(Store, "read", counted_read)
