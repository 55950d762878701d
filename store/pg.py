"""PostgreSQL behind the calls the repositories use (`store.tables`).

The repositories are written once, against `store.tables.Database` (`execute`, `execute_returning_dicts`,
`atomic`, `db[table].insert/upsert/update/get/rows_where/delete`). `PgDatabase` runs them over one
psycopg 3 connection (synchronous: it lives on the store's worker thread like the SQLite one), so
`Store.run(fn)` call sites do not change. SQL is written with `?` placeholders; they become `%s` here.
What differs between the engines in meaning (JSON paths, search, advisory locks) is in `store.sql`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from store.tables import Database


def _sql(sql: str) -> str:
    """sqlite3's `?` placeholders as psycopg's `%s` (a literal `%` doubled first). No statement of
    the store has a `?` or `%` inside a string literal: values always travel as parameters."""
    return sql.replace("%", "%%").replace("?", "%s")


def _param(value: Any) -> Any:
    # Flags are INTEGER columns on both engines (pydantic gives bools); psycopg would send a boolean.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (dict, list, tuple)):  # as sqlite-utils does for insert/update
        return json.dumps(value, default=str)
    return value


def _params(params: Sequence[Any] | None) -> list[Any]:
    return [_param(p) for p in (params or [])]


class PgCursor:
    """The result of one statement, read the way the repositories read an sqlite3 cursor."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def description(self) -> Any:
        return self._cur.description

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._cur.fetchone() if self._cur.description else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall() if self._cur.description else []

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class PgDatabase(Database):
    """One autocommit psycopg connection; `atomic()` is a transaction (a savepoint when nested)."""

    dialect = "postgresql"

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        return PgCursor(self.conn.execute(_sql(sql), _params(params)))

    def execute_returning_dicts(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.conn.execute(_sql(sql), _params(params))
        if cur.description is None:
            return []
        names = [d.name for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def executescript(self, script: str) -> None:
        """Several statements, no parameters (a schema script)."""
        self.conn.execute(script)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgDatabase]:
        with self.conn.transaction():
            yield self

    def columns(self, table: str) -> set[str]:
        return {r[0] for r in self.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ?", [table]).fetchall()}

    def column_value(self, value: Any) -> Any:
        return value  # every parameter is converted on its way to psycopg (`_params`)
