"""The optional bubblewrap sandbox for shell commands.

`bwrap_argv` wraps a command so that it sees the whole system read-only, may write only the workspace
and the write roots (and a private /tmp), has no network unless allowed, cannot see Anyy's data
directory (its store holds every conversation), gets its own PID namespace and session (no TIOCSTI
into the owner's terminal), and dies with Anyy. It does not hide other files the process may read; see
docs/host-tools.md.

Without network a new network namespace cuts IP and abstract Unix sockets, but not a Unix socket that is
a file (the Docker socket, a D-Bus or gpg-agent socket in /run or a home directory): bwrap then also
loads `unix_socket_filter`, a seccomp program that refuses `socket(AF_UNIX, …)` (and `io_uring_setup`,
which could open one around it) with EACCES.
"""

from __future__ import annotations

import errno
import platform
import shutil
import struct
from pathlib import Path

# (AUDIT_ARCH_*, socket's syscall number) for the machines the filter knows.
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
_IO_URING_SETUP = 425  # the same number on both
_AF_UNIX = 1
_LD_ABS, _JEQ, _RET = 0x20, 0x15, 0x06
_ALLOW, _REFUSE = 0x7FFF0000, 0x00050000 | errno.EACCES  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EACCES


class SandboxError(Exception):
    """The sandbox was asked for but cannot run."""


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxError('[terminal] sandbox = "bwrap" but bubblewrap is not installed (apt install bubblewrap)')
    return found


def unix_socket_filter() -> bytes | None:
    """A classic-BPF seccomp program refusing Unix sockets (see the module), or None on a machine it
    does not know. A system call of another architecture (32-bit compat) is refused outright."""
    known = _ARCHES.get(platform.machine())
    if known is None:
        return None
    audit_arch, socket_nr = known

    def op(code: int, jt: int, jf: int, k: int) -> bytes:  # struct sock_filter
        return struct.pack("=HBBI", code, jt, jf, k)

    return b"".join([  # jumps count from the next instruction
        op(_LD_ABS, 0, 0, 4),  # 0: seccomp_data.arch
        op(_JEQ, 0, 5, audit_arch),  # 1: another architecture -> 7
        op(_LD_ABS, 0, 0, 0),  # 2: seccomp_data.nr
        op(_JEQ, 3, 0, _IO_URING_SETUP),  # 3: io_uring_setup -> 7
        op(_JEQ, 0, 3, socket_nr),  # 4: anything but socket -> 8
        op(_LD_ABS, 0, 0, 16),  # 5: seccomp_data.args[0], its low half: the address family
        op(_JEQ, 0, 1, _AF_UNIX),  # 6: AF_UNIX -> 7, else -> 8
        op(_RET, 0, 0, _REFUSE),  # 7
        op(_RET, 0, 0, _ALLOW),  # 8
    ])


def bwrap_argv(argv: list[str], *, cwd: Path, writable: list[Path], hidden: list[Path], network: bool,
               seccomp_fd: int | None = None) -> list[str]:
    """`argv` run under bwrap. `hidden` directories are replaced by empty ones, then `writable` ones are
    bound read-write (a writable directory inside a hidden one stays visible). `seccomp_fd`: a descriptor
    the child inherits that holds `unix_socket_filter()`."""
    out = [bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden:
        if path.exists():
            out += ["--tmpfs", str(path)]
    for path in writable:
        if path.exists():
            out += ["--bind", str(path), str(path)]
    if not network:
        out.append("--unshare-net")
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--chdir", str(cwd), "--", *argv]
    return out
