"""One resident process per store and per data directory: exclusive, non-blocking flocks.

The lock that matters is the one beside the store file (`<store>.lock`): two residents on one store
would both deliver every message, and `[store] path` may point outside the data directory. The data
directory's `anyy.lock` is taken as well, for what lives there (attachments, tool results).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockHeld(Exception):
    """Another process holds the store or the data directory."""


class ResidentLock:
    def __init__(self, store_path: Path, data_dir: Path, *, shared: bool = False) -> None:
        # A shared store (PostgreSQL, docs/scale.md) is made for several residents: only the data
        # directory, which is each one's own, is locked.
        self.paths = [data_dir / "anyy.lock"] if shared else [store_path.with_name(store_path.name + ".lock"),
                                                               data_dir / "anyy.lock"]
        self._fds: list[int] = []

    def acquire(self) -> None:
        """Take every lock or none, raising LockHeld naming the holder's pid and what it holds. The
        kernel releases a lock when its process dies, so a crash never leaves a stale one behind."""
        try:
            for path in dict.fromkeys(self.paths):  # the store may live in the data directory
                self._fds.append(_take(path))
        except LockHeld:
            self.release()
            raise

    def release(self) -> None:
        for fd in self._fds:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._fds = []


def _take(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        what = "the store" if path.name != "anyy.lock" else "the data directory"
        raise LockHeld(f"another Anyy process (pid {holder}) is already running on {what} ({path}); "
                       "stop it first, or use a different ANYY_HOME / [store] path") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
