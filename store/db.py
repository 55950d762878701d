"""The SQLite store: one file, WAL mode, one worker thread that owns the connection.

sqlite-utils is synchronous, so the event loop never touches the connection. Every query runs on a
single dedicated thread (`Store.run`), which also serializes writes without extra locking.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlite_utils

from store.migrations import MIGRATIONS

T = TypeVar("T")


class StoreError(Exception):
    """The store could not be opened or a query failed."""


class Store:
    """Async facade over one SQLite database owned by one worker thread."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._db: sqlite_utils.Database | None = None

    async def open(self) -> "Store":
        """Open (creating if needed) the database and apply pending migrations."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory {self.path.parent}: {exc.strerror}") from None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="anyy-store")
        try:
            await self.run_raw(self._connect)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        return self

    def _connect(self) -> None:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        self._db = sqlite_utils.Database(conn)
        MIGRATIONS.apply(self._db)

    async def run_raw(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise StoreError("store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def run(self, fn: Callable[[sqlite_utils.Database], T]) -> T:
        """Run `fn(db)` on the store thread and return its result."""

        def call() -> T:
            assert self._db is not None
            return fn(self._db)

        return await self.run_raw(call)

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._executor is None:
            return
        if self._db is not None:
            await self.run_raw(self._db.conn.close)
            self._db = None
        self._executor.shutdown(wait=True)
        self._executor = None

    async def __aenter__(self) -> "Store":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
