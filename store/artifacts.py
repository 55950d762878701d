"""Artifacts: every attachment a session received and every file it produced, as a row and a file.

Files live under one folder of the data directory, each readable by the owner only (0600). A row is
added only within the limits (per file, and per user over any 24 hours); over a limit `ArtifactLimit`
says so in words for the person and nothing is stored. Unpinned artifacts older than the retention
period are deleted, row and file, by `sweep`. `source_key` (the turn and attachment index) makes adding
the same inbound attachment twice, as a turn re-run after a crash does, return the first row.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from store.db import Store
from store.records import ArtifactRecord, dumps, iso, row_to, utcnow
from store.sql import lock
from store.tables import Database

_UNSAFE = re.compile(r"[^\w.-]+")
_JSON = ("meta",)
_MB = 1024 * 1024


class ArtifactLimit(Exception):
    """Over a size limit; the message is written for the person who sent or asked for the file."""


def mb(size: int) -> str:
    return f"{size / _MB:.1f} MB"


class Artifacts:
    """The artifact rows and their files under `root`."""

    def __init__(self, store: Store, root: Path, *, max_file_bytes: int, max_daily_bytes: int) -> None:
        self.store = store
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.max_daily_bytes = max_daily_bytes

    def check_file_size(self, size: int, name: str) -> None:
        """Raise ArtifactLimit when one file of `size` bytes is over the per-file limit."""
        if size > self.max_file_bytes:
            raise ArtifactLimit(f"{name} is {mb(size)}; files up to {mb(self.max_file_bytes)} are kept "
                                "([artifacts] max_file_mb), so I did not store it.")

    async def add_file(self, src: Path, *, session_id: str, user_key: str, name: str, mime_type: str,
                       origin: Literal["received", "produced"] = "received", source_key: str | None = None,
                       meta: dict[str, Any] | None = None) -> ArtifactRecord:
        """Move `src` into the artifact folder and record it. Raises ArtifactLimit (then `src` is left
        where it was, for the caller to delete) or returns the row already recorded for `source_key`."""
        if source_key is not None:
            existing = await self.by_source(source_key)
            if existing is not None:
                return existing
        size = (await asyncio.to_thread(src.stat)).st_size
        self.check_file_size(size, name)
        artifact_id = f"a{secrets.token_hex(5)}"
        dest = self.root / f"{artifact_id}-{_safe(name)}"
        digest = await asyncio.to_thread(_adopt, src, dest)
        row = {"id": artifact_id, "session_id": session_id, "user_key": user_key, "name": name, "type": mime_type,
               "size": size, "path": str(dest), "sha256": digest, "pinned": 0, "origin": origin,
               "source_key": source_key, "meta": dumps(meta or {}), "created_at": iso(utcnow())}
        try:
            return await self.store.run(lambda db: self._insert(db, row))
        except BaseException:
            await asyncio.to_thread(_move_back, dest, src)
            raise

    async def add_bytes(self, data: bytes, *, session_id: str, user_key: str, name: str, mime_type: str,
                        origin: Literal["received", "produced"] = "produced",
                        meta: dict[str, Any] | None = None) -> ArtifactRecord:
        """Record `data` as a new artifact (a produced file). Raises ArtifactLimit, storing nothing."""
        self.check_file_size(len(data), name)
        staging = self.root / ".staging" / f"{secrets.token_hex(8)}"
        await asyncio.to_thread(_write_private, staging, data)
        try:
            return await self.add_file(staging, session_id=session_id, user_key=user_key, name=name,
                                       mime_type=mime_type, origin=origin, meta=meta)
        finally:
            await asyncio.to_thread(staging.unlink, True)

    def _insert(self, db: Database, row: dict[str, Any]) -> ArtifactRecord:
        with db.atomic():
            lock(db, f"artifacts:{row['user_key']}")  # the quota read and the insert, one at a time per user
            return self._insert_within_quota(db, row)

    def _insert_within_quota(self, db: Database, row: dict[str, Any]) -> ArtifactRecord:
        since = iso(utcnow() - timedelta(days=1))
        used = db.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE user_key = ? AND created_at >= ?",
                          [row["user_key"], since]).fetchone()[0]
        if used + row["size"] > self.max_daily_bytes:
            raise ArtifactLimit(f"{row['name']} ({mb(row['size'])}) would take you past {mb(self.max_daily_bytes)} "
                                f"of files in 24 hours ([artifacts] max_daily_mb; {mb(used)} used), so I did not "
                                "store it.")
        db["artifacts"].insert(row)
        return _record(row)

    async def by_source(self, source_key: str) -> ArtifactRecord | None:
        rows = await self.store.run(lambda db: list(db["artifacts"].rows_where("source_key = ?", [source_key])))
        return _record(rows[0]) if rows else None

    async def get(self, session_id: str, artifact_id: str) -> ArtifactRecord | None:
        """One of the session's artifacts; None when it is missing or another session's."""
        rows = await self.store.run(lambda db: list(db["artifacts"].rows_where(
            "id = ? AND session_id = ?", [artifact_id, session_id])))
        return _record(rows[0]) if rows else None

    async def for_session(self, session_id: str, limit: int = 50) -> list[ArtifactRecord]:
        """The session's artifacts, newest first."""
        rows = await self.store.run(lambda db: list(db["artifacts"].rows_where(
            "session_id = ?", [session_id], order_by="created_at DESC", limit=limit)))
        return [_record(r) for r in rows]

    async def pin(self, session_id: str, artifact_id: str, pinned: bool = True) -> ArtifactRecord | None:
        """Keep (or stop keeping) an artifact beyond the retention period; None when not the session's."""

        def op(db: Database) -> ArtifactRecord | None:
            cur = db.execute("UPDATE artifacts SET pinned = ? WHERE id = ? AND session_id = ?",
                             [int(pinned), artifact_id, session_id])
            return _record(db["artifacts"].get(artifact_id)) if cur.rowcount else None

        return await self.store.run(op)

    async def update_meta(self, artifact_id: str, meta: dict[str, Any]) -> None:
        """Merge `meta` into the artifact's metadata (e.g. a transcript made later)."""

        def op(db: Database) -> None:
            current = row_to(ArtifactRecord, db["artifacts"].get(artifact_id), _JSON).meta
            db["artifacts"].update(artifact_id, {"meta": dumps({**current, **meta})})

        await self.store.run(op)

    async def sweep(self, retention: timedelta, now: datetime | None = None) -> int:
        """Delete unpinned artifacts created more than `retention` ago (rows, then files); returns how many."""
        cutoff = iso((now or utcnow()) - retention)

        def op(db: Database) -> list[str]:
            rows = list(db["artifacts"].rows_where("pinned = 0 AND created_at < ?", [cutoff], select="id, path"))
            db.execute("DELETE FROM artifacts WHERE pinned = 0 AND created_at < ?", [cutoff])
            return [r["path"] for r in rows]

        paths = await self.store.run(op)
        for path in paths:
            await asyncio.to_thread(Path(path).unlink, True)
        return len(paths)


def _record(row: dict[str, Any]) -> ArtifactRecord:
    return row_to(ArtifactRecord, {**row, "pinned": bool(row["pinned"])}, _JSON)


def _safe(name: str) -> str:
    cleaned = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip("._")
    return cleaned[:80] or "file"


def _private_dir(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def _write_private(path: Path, data: bytes) -> None:
    _private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _adopt(src: Path, dest: Path) -> str:
    """Move `src` to `dest` (owner-only) and return its SHA-256."""
    _private_dir(dest.parent)
    digest = hashlib.sha256()
    with src.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    try:
        os.replace(src, dest)
    except OSError:  # another file system (a store path elsewhere): copy instead
        shutil.copyfile(src, dest)
        src.unlink()
    os.chmod(dest, 0o600)
    return digest.hexdigest()


def _move_back(dest: Path, src: Path) -> None:
    if dest.exists():
        os.replace(dest, src)
