"""The workspace: where relative paths point, and the only places writes may go.

Reads anchor relative paths to the workspace root; an absolute path reads wherever the process may
read (the real read boundary is the process's own file permissions, or the sandbox), except the private
paths (`connectors.private_paths`: other processes' /proc entries, Anyy's data directory and config file),
which are refused. Writes go only
inside the root or a configured write root, checked on the fully resolved path, so a symlink inside the
workspace cannot carry a write outside it. Writes are atomic: a temporary file in the target's
directory, then a rename, with the target's content hash checked again right before the rename.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from connectors.private_paths import PrivatePaths


class WorkspaceError(Exception):
    """A path or write the workspace rules refuse; the message says why and what is allowed."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_hash(path: Path) -> str | None:
    """The content hash of a regular file, or None when nothing exists there."""
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise WorkspaceError(f"{path} is a directory") from None


class Workspace:
    def __init__(self, root: Path, write_roots: list[Path] | tuple[Path, ...] = (),
                 private: PrivatePaths | None = None) -> None:
        self.root = root.expanduser()
        self.write_roots = [p.expanduser() for p in write_roots]
        self.private = private or PrivatePaths()

    def ensure(self) -> Path:
        """The root, created on first use."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root

    def roots(self) -> list[Path]:
        """Every directory writes may go to, resolved."""
        return [self.root.resolve(), *(p.resolve() for p in self.write_roots)]

    def resolve(self, path: str) -> Path:
        """A path for reading: relative to the root, `~` expanded, symlinks resolved."""
        if not path.strip():
            raise WorkspaceError("the path is empty")
        p = Path(path).expanduser()
        return (p if p.is_absolute() else self.ensure() / p).resolve()

    def resolve_read(self, path: str, *, recursive: bool = False) -> Path:
        """A path for reading (`recursive`: a folder to search); refused when it is, or (recursive)
        contains, a private path."""
        target = self.resolve(path)
        why = self.private.refusal(str(target), self.root, recursive=recursive)
        if why:
            raise WorkspaceError(f"refused: {why}; the file tools never read it")
        return target

    def readable(self, path: Path) -> bool:
        """Whether a file met while searching may be read (a symlink is followed only to a readable place)."""
        return not path.is_symlink() or self.private.refusal(str(path), self.root) is None

    def resolve_write(self, path: str) -> Path:
        """A path for writing; refused unless it lies inside the root or a write root."""
        target = self.resolve(path)
        roots = self.roots()
        if not any(target == r or target.is_relative_to(r) for r in roots):
            allowed = ", ".join(str(r) for r in roots)
            raise WorkspaceError(f"{target} is outside the directories Anyy may write to ({allowed}); "
                                 "add a write_roots entry under [workspace] to allow more")
        if target in roots:
            raise WorkspaceError(f"{target} is a directory")
        return target

    @staticmethod
    def write_atomic(target: Path, data: bytes, expected_hash: str | None) -> None:
        """Write `data` to `target` only if its content still hashes to `expected_hash` (None: only if
        it does not exist). A temporary file in the same directory is renamed over the target; a new
        file is linked into place, which fails if something appeared there meanwhile."""
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".anyy-tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if expected_hash is None:
                os.chmod(tmp, 0o666 & ~_umask())  # a new file gets the mode any other program would give it
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    raise WorkspaceError(f"{target} appeared since it was checked; nothing was written") from None
            else:
                if file_hash(target) != expected_hash:
                    raise WorkspaceError(f"{target} changed since it was read; nothing was written")
                try:
                    os.chmod(tmp, target.stat().st_mode & 0o7777)  # keep the file's permissions
                except FileNotFoundError:
                    raise WorkspaceError(f"{target} was removed since it was read; nothing was written") from None
                os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it, racing other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
