"""The store: one database on one worker thread that owns the connection.

The embedded default is one SQLite file (WAL mode). With a `url`, the database is PostgreSQL, which
several residents may share (docs/scale.md); `store.pg` offers it through the same calls. Both drivers
are synchronous, so the event loop never touches the connection: every query runs on a single dedicated
thread (`Store.run`), which also serializes this process's writes without extra locking.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import re
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from store import leases
from store.batch import Batcher
from store.records import utcnow
from store.tables import SqliteDatabase

T = TypeVar("T")
# The number of migrations in `store.migrations`, which a migrated SQLite file records as its
# `user_version`: a file already at it opens without loading the migrations (and sqlite-utils with them).
# Adding a migration adds one here (tests/test_startup_imports.py checks it).
SCHEMA_VERSION = 16


class StoreError(Exception):
    """The store could not be opened or a query failed."""


def redact_url(url: str) -> str:
    """The URL with any password replaced, for logs and messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


class Store:
    """Async facade over one database connection owned by one worker thread.

    `owner` names this store's process in every owner column and lease (`store.leases`); two stores in
    one process (a test of two residents) pass different ones. `shared` is True on PostgreSQL, where
    other residents may be working on the same rows: the repositories then claim what they deliver."""

    def __init__(self, path: Path | str, *, url: str | None = None, password: str | None = None,
                 owner: str | None = None) -> None:
        self.path = Path(path)
        self.url = url or None
        self._password = password
        self.owner = owner or leases.OWNER
        self._worker: _Worker | None = None
        self._db: Any = None
        self._skew = timedelta(0)  # the database's clock minus this host's (PostgreSQL)
        self._batch = Batcher(self.run)

    @property
    def shared(self) -> bool:
        return self.url is not None

    @property
    def dialect(self) -> str:
        return "postgresql" if self.shared else "sqlite"

    @property
    def where(self) -> str:
        """What the store is, for messages: the file, or the URL without its password."""
        return redact_url(self.url) if self.url else str(self.path)

    def now(self) -> datetime:
        """The time by the database's clock (lease times: residents on several hosts agree on them)."""
        return utcnow() + self._skew

    async def open(self) -> Store:
        """Open (creating if needed) the database and apply pending migrations."""
        try:  # the SQLite file's folder; a PostgreSQL store's files (artifacts) live there too
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory {self.path.parent}: {exc.strerror}") from None
        self._worker = _Worker()
        try:
            await self.run_raw(self._connect_pg if self.shared else self._connect)
        except Exception as exc:
            self._worker.stop()
            self._worker = None
            if isinstance(exc, (sqlite3.Error, OSError)) or type(exc).__module__.startswith("psycopg"):
                why = " ".join(redact_url(str(exc)).split())  # psycopg's messages span lines
                raise StoreError(f"cannot open the store at {self.where}: {why}") from exc
            raise
        return self

    def _connect(self) -> None:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        self._db = SqliteDatabase(conn)
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            from store.migrations import migrate

            migrate(conn)

    def _connect_pg(self) -> None:
        import psycopg  # only a PostgreSQL store pays for the driver

        from store import pg_schema
        from store.pg import PgDatabase

        if self.url is None:
            raise StoreError("no PostgreSQL URL to connect to")  # only a shared store connects
        # psycopg drops a None parameter: without a password here the URL's or libpq's own (PGPASSWORD) applies.
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, application_name="anyy",
                               password=self._password or None)
        self._db = PgDatabase(conn)
        pg_schema.migrate(self._db)
        self._measure_skew()

    def _measure_skew(self) -> None:
        if self.shared:
            db_now = self._db.execute("SELECT now()").fetchone()[0]
            self._skew = db_now - utcnow()

    async def run_raw(self, fn: Callable[[], T]) -> T:
        if self._worker is None:
            raise StoreError("store is not open")
        return await self._worker.call(fn)

    async def run(self, fn: Callable[[Any], T]) -> T:
        """Run `fn(db)` on the store thread and return its result."""

        def call() -> T:
            assert self._db is not None
            if self.shared and self._db.conn.closed:
                # The server restarted or the network dropped: the call that saw it failed (whether
                # its transaction committed is the caller's to find out); this one gets a new connection.
                self._connect_pg()
            return fn(self._db)

        return await self.run_raw(call)

    async def write(self, fn: Callable[[Any], T]) -> T:
        """Run `fn(db)` in a transaction on the store thread and return its result. On SQLite, writes
        issued together share one round trip and one commit (`store.batch`), so `fn` must do nothing
        but database work (it may be run a second time if the shared transaction fails)."""
        if self.shared:
            def alone(db: Any) -> T:
                with db.atomic():
                    return fn(db)

            return await self.run(alone)
        return await self._batch.add(fn)

    async def read(self, fn: Callable[[Any], T]) -> T:
        """`run` for a read that goes along with others issued together (on SQLite, in `write`'s batch:
        a wave of turns reading their sessions' history is one round trip). `fn` must only read."""
        return await (self.run(fn) if self.shared else self._batch.add(fn, write=False))

    async def renew(self) -> None:
        """Extend every lease this store's owner holds, by the database's clock (measured again now)."""

        def op(db: Any) -> None:
            self._measure_skew()
            leases.renew(db, self.owner, self.now())

        await self.run(op)

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._worker is None:
            return
        if self._db is not None:
            await self.run_raw(self._db.conn.close)
            self._db = None
        self._worker.stop()
        self._worker = None

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Worker:
    """The store's thread: runs calls one at a time, in the order given.

    A plain queue and `call_soon_threadsafe` instead of `run_in_executor`: a round trip is most of the
    store's cost per turn (about ten per turn), and the executor's two futures chained across threads
    cost about 20 µs more per call (throwaway measurement: 35 vs 55 µs for an empty call). As with the
    executor, a call whose caller was cancelled before it started is not run. The thread is a daemon,
    so a store never closed does not hold the interpreter at exit; SQLite and PostgreSQL roll back a
    transaction cut off there, as after a crash.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None]
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="anyy-store", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, fn))
        return await future

    def stop(self) -> None:
        """Finish the calls already queued, then end the thread (waiting for it)."""
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            loop, future, fn = item
            if future.cancelled():
                continue
            try:
                result = fn()
            except BaseException as exc:
                _hand(loop, future, None, exc)
            else:
                _hand(loop, future, result, None)


def _hand(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    def settle() -> None:
        if future.cancelled():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody is waiting any more
        loop.call_soon_threadsafe(settle)
