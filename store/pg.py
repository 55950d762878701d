"""PostgreSQL behind the part of the sqlite-utils `Database` API the repositories use.

The repositories are written once, against sqlite-utils (`execute`, `execute_returning_dicts`, `atomic`,
`db[table].insert/upsert/update/get/rows_where/delete`). `PgDatabase` offers the same calls over one
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


class PgTable:
    """`db[name]` for a table whose primary key is `id` (every table the repositories address so)."""

    def __init__(self, db: PgDatabase, name: str) -> None:
        self.db = db
        self.name = name
        self.last_pk: Any = None

    def insert(self, row: dict[str, Any]) -> PgTable:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        has_id = self.db.has_column(self.name, "id")
        returning = " RETURNING id" if has_id else ""
        got = self.db.execute(f"INSERT INTO {self.name} ({cols}) VALUES ({marks}){returning}", list(row.values()))
        self.last_pk = got.fetchone()[0] if has_id else None  # type: ignore[index]
        return self

    def upsert(self, row: dict[str, Any], pk: str | tuple[str, ...] = "id") -> PgTable:
        keys = (pk,) if isinstance(pk, str) else pk
        sets = ", ".join(f"{c} = excluded.{c}" for c in row if c not in keys)
        self.db.execute(f"INSERT INTO {self.name} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})"
                        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}", list(row.values()))
        return self

    def update(self, pk_value: Any, values: dict[str, Any]) -> PgTable:
        if values:
            self.db.execute(f"UPDATE {self.name} SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
                            [*values.values(), pk_value])
        return self

    def get(self, pk_value: Any) -> dict[str, Any]:
        rows = self.db.execute_returning_dicts(f"SELECT * FROM {self.name} WHERE id = ?", [pk_value])
        if not rows:
            raise LookupError(f"no row {pk_value!r} in {self.name}")
        return rows[0]

    def rows_where(self, where: str | None = None, where_args: Sequence[Any] | None = None, *,
                   order_by: str | None = None, limit: int | None = None, select: str = "*") -> Iterator[dict]:
        sql = f"SELECT {select} FROM {self.name}"
        if where:
            sql += f" WHERE {where}"
        if order_by:
            sql += f" ORDER BY {order_by}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return iter(self.db.execute_returning_dicts(sql, where_args))

    @property
    def rows(self) -> Iterator[dict]:
        return self.rows_where()

    @property
    def count(self) -> int:
        return int(self.db.execute(f"SELECT count(*) FROM {self.name}").fetchone()[0])  # type: ignore[index]

    def delete(self, pk_value: Any) -> PgTable:
        self.db.execute(f"DELETE FROM {self.name} WHERE id = ?", [pk_value])
        return self


class PgDatabase:
    """One autocommit psycopg connection; `atomic()` is a transaction (a savepoint when nested)."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._columns: dict[str, set[str]] = {}

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        return PgCursor(self.conn.execute(_sql(sql), _params(params)))  # type: ignore[arg-type]

    def execute_returning_dicts(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.conn.execute(_sql(sql), _params(params))  # type: ignore[arg-type]
        if cur.description is None:
            return []
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        return iter(self.execute_returning_dicts(sql, params))

    def executescript(self, script: str) -> None:
        """Several statements, no parameters (a schema script)."""
        self.conn.execute(script)  # type: ignore[call-overload]

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgDatabase]:
        with self.conn.transaction():
            yield self

    def __getitem__(self, name: str) -> PgTable:
        return PgTable(self, name)

    def table(self, name: str) -> PgTable:
        return PgTable(self, name)

    def has_column(self, table: str, column: str) -> bool:
        if table not in self._columns:
            self._columns[table] = {r[0] for r in self.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND table_name = ?", [table]).fetchall()}
        return column in self._columns[table]

    def close(self) -> None:
        self.conn.close()
