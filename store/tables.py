"""The part of the sqlite-utils `Database` API the repositories use, written once for both engines.

The repositories call `execute`, `execute_returning_dicts`, `query`, `atomic` and
`db[table].insert/upsert/update/get/rows_where/delete/rows/count` (every table they address by key has
its primary key in `id`). `Database` builds those calls' SQL; a subclass says how a statement reaches its
driver and how a transaction opens: `SqliteDatabase` here for the SQLite file, `store.pg.PgDatabase`
for PostgreSQL. So opening a store needs neither sqlite-utils nor psycopg: sqlite-utils (which imports
click, pluggy and dateutil, ~40 ms) is loaded only to migrate a SQLite file (`store.migrations`).
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import json
import secrets
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from typing import Any


class Table:
    """`db[name]`: rows addressed by their `id`."""

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.name = name
        self.last_pk: Any = None

    def insert(self, row: dict[str, Any]) -> Table:
        values = [self.db.column_value(v) for v in row.values()]
        has_id = self.db.has_column(self.name, "id")
        returning = " RETURNING id" if has_id else ""
        got = self.db.execute(f"INSERT INTO {self.name} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})"
                              f"{returning}", values)
        self.last_pk = got.fetchone()[0] if has_id else None
        return self

    def upsert(self, row: dict[str, Any], pk: str | tuple[str, ...] = "id") -> Table:
        keys = (pk,) if isinstance(pk, str) else pk
        sets = ", ".join(f"{c} = excluded.{c}" for c in row if c not in keys)
        self.db.execute(f"INSERT INTO {self.name} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})"
                        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}",
                        [self.db.column_value(v) for v in row.values()])
        return self

    def update(self, pk_value: Any, values: dict[str, Any]) -> Table:
        if values:
            self.db.execute(f"UPDATE {self.name} SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
                            [*(self.db.column_value(v) for v in values.values()), pk_value])
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
        return int(self.db.execute(f"SELECT count(*) FROM {self.name}").fetchone()[0])

    def delete(self, pk_value: Any) -> Table:
        self.db.execute(f"DELETE FROM {self.name} WHERE id = ?", [pk_value])
        return self


class Database:
    """One connection; SQL with `?` placeholders. Subclasses implement `execute`, `atomic`, `executescript`,
    `columns` and `column_value`."""

    dialect = ""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._columns: dict[str, set[str]] = {}

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run one statement; a cursor (`fetchone`, `fetchall`, `rowcount`, `description`)."""
        raise NotImplementedError

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction (a savepoint when nested)."""
        raise NotImplementedError

    def executescript(self, script: str) -> None:
        """Several statements, no parameters (a schema script)."""
        raise NotImplementedError

    def columns(self, table: str) -> set[str]:
        raise NotImplementedError

    def column_value(self, value: Any) -> Any:
        """A value as `insert`/`upsert`/`update` store it (JSON for a dict or a list)."""
        raise NotImplementedError

    def execute_returning_dicts(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.execute(sql, params)
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        return iter(self.execute_returning_dicts(sql, params))

    def __getitem__(self, name: str) -> Table:
        return Table(self, name)

    def table(self, name: str) -> Table:
        return Table(self, name)

    def has_column(self, table: str, column: str) -> bool:
        if table not in self._columns:
            self._columns[table] = self.columns(table)
        return column in self._columns[table]

    def close(self) -> None:
        self.conn.close()


class SqliteDatabase(Database):
    """A sqlite3 connection opened with `isolation_level=None` (autocommit: a statement outside `atomic`
    commits at once), with the conversions and transactions sqlite-utils uses on it, so a file written
    through either reads the same."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        conn.execute("PRAGMA recursive_triggers=on")  # as sqlite-utils' Database sets it

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> sqlite3.Cursor:
        return self.conn.execute(sql, params or ())

    def executescript(self, script: str) -> None:
        self.conn.executescript(script)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[SqliteDatabase]:
        if self.conn.in_transaction:
            savepoint = f"anyy_{secrets.token_hex(8)}"
            self.conn.execute(f"SAVEPOINT {savepoint}")
            try:
                yield self
            except BaseException:
                if self.conn.in_transaction:  # a RAISE(ROLLBACK) may have ended the whole transaction
                    self.conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
                    self.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
                raise
            self.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
            return
        self.conn.execute("BEGIN")
        try:
            yield self
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def column_value(self, value: Any) -> Any:
        # sqlite-utils' conversions for inserted and updated values.
        if isinstance(value, decimal.Decimal):
            return float(value)
        if isinstance(value, (dict, list, tuple)):
            return json.dumps(value, default=repr, ensure_ascii=False)
        if isinstance(value, (datetime.time, datetime.date, datetime.datetime)):
            return value.isoformat()
        if isinstance(value, (datetime.timedelta, uuid.UUID)):
            return str(value)
        return value
