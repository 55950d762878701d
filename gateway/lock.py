"""One resident process per data directory: an exclusive, non-blocking flock on `anyy.lock`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockHeld(Exception):
    """Another process holds the data directory."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "anyy.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise LockHeld naming the holder's pid. The kernel releases it if the
        process dies, so a crash never leaves a stale lock behind."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise LockHeld(f"another Anyy process (pid {holder}) is already running on {self.path.parent}; "
                           "stop it first, or use a different ANYY_HOME") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
