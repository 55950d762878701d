"""The optional bubblewrap sandbox for shell commands.

`bwrap_argv` wraps a command so that it sees the whole system read-only, may write only the workspace
and the write roots (and a private /tmp), has no network unless allowed, cannot see Anyy's data
directory (its store holds every conversation), gets its own PID namespace and session (no TIOCSTI
into the owner's terminal), and dies with Anyy. It does not hide other files the process may read; see
docs/host-tools.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path


class SandboxError(Exception):
    """The sandbox was asked for but cannot run."""


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxError('[terminal] sandbox = "bwrap" but bubblewrap is not installed (apt install bubblewrap)')
    return found


def bwrap_argv(argv: list[str], *, cwd: Path, writable: list[Path], hidden: list[Path], network: bool) -> list[str]:
    """`argv` run under bwrap. `hidden` directories are replaced by empty ones, then `writable` ones are
    bound read-write (a writable directory inside a hidden one stays visible)."""
    out = [bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden:
        if path.exists():
            out += ["--tmpfs", str(path)]
    for path in writable:
        if path.exists():
            out += ["--bind", str(path), str(path)]
    if not network:
        out.append("--unshare-net")
    out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--chdir", str(cwd), "--", *argv]
    return out
