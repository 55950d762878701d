"""The SQLite search index of the transcript, filled in batches instead of by every insert.

A trigram FTS5 entry costs about four times the message insert itself (measured in issue 25: `git show
c172a5c:docs/benchmarks.md`), and most of that is the per-commit write of a tiny index segment. So a new
message is not indexed as it is written: `catch_up` indexes every row past the high-water mark in one
transaction — before every search (a search still sees every message), after a few dozen new rows, and
on the gateway's lease tick (rows other processes wrote). The update and delete triggers touch the index
only for rows already in it. PostgreSQL searches through its trigram index and needs none of this.
"""

from __future__ import annotations

from typing import Any

from store.sql import is_pg

ROLES = "('user', 'assistant', 'summary')"  # the searchable rows (m010)
_INDEXED = "(SELECT indexed_to FROM messages_fts_state)"


def m016_deferred_search_index(db: Any) -> None:
    """Index the transcript in batches: rows up to `messages_fts_state.indexed_to` are in the index
    (all of them at migration time); newer ones wait for `catch_up`. The insert trigger goes: message
    ids are AUTOINCREMENT, never reused, so a new row is always above the mark."""
    db.executescript(
        f"""
        CREATE TABLE messages_fts_state (id INTEGER PRIMARY KEY CHECK (id = 1), indexed_to INTEGER NOT NULL);
        INSERT INTO messages_fts_state (id, indexed_to) SELECT 1, coalesce(max(id), 0) FROM messages;
        DROP TRIGGER messages_ai;
        DROP TRIGGER messages_ad;
        DROP TRIGGER messages_au;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages WHEN old.role IN {ROLES} AND old.id <= {_INDEXED} BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        END;
        CREATE TRIGGER messages_au AFTER UPDATE ON messages WHEN old.role IN {ROLES} AND old.id <= {_INDEXED} BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO messages_fts (rowid, content) SELECT new.rowid, new.content WHERE new.role IN {ROLES};
        END;
        """
    )


def catch_up(db: Any) -> int:
    """Index every searchable row written since the last catch-up, in one transaction; returns how many
    rows were looked at (0 on PostgreSQL)."""
    if is_pg(db):
        return 0
    (indexed_to,) = db.execute("SELECT indexed_to FROM messages_fts_state").fetchone()
    (newest,) = db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
    if newest <= indexed_to:
        return 0
    db.execute("BEGIN IMMEDIATE")  # another process catching up at once waits, then finds nothing to do
    try:
        (indexed_to,) = db.execute("SELECT indexed_to FROM messages_fts_state").fetchone()
        (newest,) = db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        db.execute(f"INSERT INTO messages_fts (rowid, content) SELECT id, content FROM messages"
                   f" WHERE id > ? AND id <= ? AND role IN {ROLES}", [indexed_to, newest])
        db.execute("UPDATE messages_fts_state SET indexed_to = ?", [newest])
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return max(0, newest - indexed_to)
