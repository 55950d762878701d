"""The few places where SQLite and PostgreSQL need different SQL, as small functions of the connection.

Everything else is written once: both engines accept `ON CONFLICT`, `RETURNING`, `IS NOT DISTINCT
FROM` and `FILTER`. `db` is a `store.tables.SqliteDatabase` (sqlite-utils' `Database` in a migration)
or a `store.pg.PgDatabase`; the latter says `dialect = "postgresql"`.
"""

from __future__ import annotations

import zlib
from typing import Any


def dialect(db: Any) -> str:
    """'postgresql' or 'sqlite'."""
    return getattr(db, "dialect", "sqlite")


def is_pg(db: Any) -> bool:
    return dialect(db) == "postgresql"


def json_text(db: Any, column: str, *path: str) -> str:
    """A SQL expression: the text at `path` of a JSON text column (NULL when absent)."""
    if is_pg(db):
        return f"({column}::jsonb #>> '{{{','.join(path)}}}')"
    return f"json_extract({column}, '$.{'.'.join(path)}')"


def json_number(db: Any, column: str, *path: str) -> str:
    """A SQL expression: the number at `path` of a JSON text column (NULL when absent)."""
    if is_pg(db):
        return f"({json_text(db, column, *path)})::bigint"
    return json_text(db, column, *path)


def lock(db: Any, key: str) -> None:
    """Serialise the rest of the current transaction with every other one taking `key` (a read that
    decides a write: a quota, a 'does it exist yet'). SQLite has one writer already: nothing to do.
    PostgreSQL: a transaction-scoped advisory lock, released at commit or rollback."""
    if is_pg(db):
        db.execute("SELECT pg_advisory_xact_lock(?)", [advisory_key(key)])


def advisory_key(key: str) -> int:
    """A stable signed 64-bit lock number for `key` (the same in every process)."""
    return zlib.crc32(key.encode()) | (0x5A11 << 32)
