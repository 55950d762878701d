"""Paths no read without the owner's approval may touch: other processes' `/proc` entries and Anyy's own
files.

`/proc/<pid>/` holds a process's environment (`environ`: the resident's holds the model API key it was
started with), its command line, its memory and its open files (`fd/`: the store). Anyy's data directory
holds the store, every conversation and the tool results; its config file names every secret. A path is
checked after resolving symlinks and `..` against the working directory, so no spelling of it gets
through (`/proc/self/../1/environ`, a symlink in the workspace); a `/proc/<pid>/` path is refused as
spelled too, since `fd/3` resolves to the file the process has open. The workspace and the write roots stay
readable even when they lie inside the data directory.

`protect_this_process` makes the resident's own /proc entries readable by root only, so even an approved
command running as the same user cannot read the environment Anyy was started with.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

_PROCESS_DIR = re.compile(r"^/proc/(?:\d+|self|thread-self)(?:/|$)")


class PrivatePaths:
    """`private`: directories and files (the data directory, the config file); `open_`: directories
    inside them that stay readable (the workspace, the write roots)."""

    def __init__(self, private: Iterable[Path] = (), open_: Iterable[Path] = ()) -> None:
        self.private = [_real(p) for p in private]
        self.open = [_real(p) for p in open_]

    def refusal(self, path: str, cwd: Path, *, recursive: bool = False) -> str | None:
        """Why reading `path` (relative to `cwd`) is not for a read without approval, or None.
        `recursive`: the read descends into a directory, so one that contains a private path is private."""
        spelled = os.path.normpath(Path(cwd, os.path.expanduser(path)))
        target = _real(Path(spelled))
        text = str(target)
        # Both forms: /proc/<pid>/fd/3 resolves to the file it has open, which may look harmless.
        if _PROCESS_DIR.match(text) or _PROCESS_DIR.match(spelled):
            return f"{path} is a process's /proc entry (its environment, memory or open files)"
        for private in self.private:
            inside = target == private or target.is_relative_to(private)
            if inside and not any(target == o or target.is_relative_to(o) for o in self.open):
                return f"{path} is inside Anyy's own files ({private})"
            if recursive and not inside and private.is_relative_to(target):
                return f"{path} contains Anyy's own files ({private})"
        if recursive and text in ("/", "/proc"):
            return f"{path} contains /proc (other processes' environments and memory)"
        return None

    def first_refusal(self, args: Sequence[str], cwd: Path, *, recursive: bool = False) -> str | None:
        """The first refusal among a command's arguments: each word that is not an option, and the value
        of an option (`--file=X`, `-fX`)."""
        for arg in args:
            for candidate in _candidates(arg):
                why = self.refusal(candidate, cwd, recursive=recursive)
                if why:
                    return why
        return None


def _candidates(arg: str) -> list[str]:
    if not arg.startswith("-") or arg == "-":
        return [arg] if arg else []
    if "=" in arg:
        return [arg.split("=", 1)[1]]
    if not arg.startswith("--") and len(arg) > 2:
        return [arg[2:]]  # -f/proc/1/environ
    return []


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


_PR_SET_DUMPABLE = 4


def protect_this_process() -> bool:
    """Mark this process not dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`): its `/proc/<pid>/environ`,
    `mem`, `fd/` and the like then belong to root, and no other process of the same user (a command the
    owner approved, a program the model ran) can read the secrets its environment still holds. Costs no
    core dumps and no debugger attach as the same user. Returns whether it applied (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
