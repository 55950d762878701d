"""Running host commands: asyncio subprocesses with a scrubbed environment, output captured to files,
timeouts, and TERM-then-KILL of the whole process group.

Knows nothing of models or chats. Every child starts in its own session (its own process group), so
stopping it also stops whatever it spawned; its stdout and stderr go to one file, so a chatty command
cannot fill Anyy's memory, and a result reads a bounded head and tail of that file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connectors.sandbox import bwrap_argv, unix_socket_filter

# Variables whose names say they hold a credential never reach a child, whatever config says.
_SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
GRACE_S = 3.0


def scrub_env(environ: Mapping[str, str], secret_names: Iterable[str]) -> dict[str, str]:
    """`environ` without the named secrets, without credential-like names, and without any variable
    whose value equals a named secret's value (the same token exported under a second name)."""
    names = set(secret_names)
    secret_values = {environ[n] for n in names if environ.get(n)}
    return {k: v for k, v in environ.items()
            if k not in names and not _SECRET_NAME.search(k) and v not in secret_values}


@dataclass(frozen=True)
class Settings:
    """How commands run: where, with which environment, sandboxed or not."""

    workspace: Path
    writable: tuple[Path, ...]  # the workspace and the write roots
    hidden: tuple[Path, ...]  # directories the sandbox replaces with empty ones (Anyy's data directory)
    secret_names: frozenset[str]
    sandbox: bool = False
    network: bool = True

    def env(self) -> dict[str, str]:
        env = scrub_env(os.environ, self.secret_names)
        env.update({"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"})
        return env

    def argv(self, argv: list[str], cwd: Path, seccomp_fd: int | None = None) -> list[str]:
        if not self.sandbox:
            return argv
        return bwrap_argv(argv, cwd=cwd, writable=list(self.writable), hidden=list(self.hidden), network=self.network,
                          seccomp_fd=seccomp_fd)

    def socket_filter_fd(self) -> int | None:
        """Without network under the sandbox: a pipe holding the seccomp program that refuses Unix
        sockets (bwrap reads it), for the child to inherit; the caller closes it after the start."""
        program = unix_socket_filter() if self.sandbox and not self.network else None
        if program is None:
            return None
        read, write = os.pipe()
        os.write(write, program)  # far below a pipe's buffer
        os.close(write)
        return read


@dataclass
class Output:
    text: str
    total_bytes: int
    truncated: bool


def read_output(path: Path, max_bytes: int, offset: int = 0) -> Output:
    """The output file from `offset` on: all of it up to `max_bytes`, else its head and tail."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            total = fh.tell()
            fh.seek(min(offset, total))
            size = total - fh.tell()
            if size <= max_bytes:
                return Output(fh.read().decode("utf-8", "replace"), total, False)
            half = max_bytes // 2
            head = fh.read(half)
            fh.seek(total - half)
            tail = fh.read()
    except FileNotFoundError:
        return Output("", 0, False)
    skipped = size - len(head) - len(tail)
    text = (head.decode("utf-8", "replace") + f"\n[… {skipped} bytes of output omitted …]\n"
            + tail.decode("utf-8", "replace"))
    return Output(text, total, True)


class Job:
    """One started child process: its output file, and the means to feed, wait for and stop it."""

    def __init__(self, proc: asyncio.subprocess.Process, log_path: Path, started: float) -> None:
        self.proc = proc
        self.log_path = log_path
        self.started = started

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def exit_code(self) -> int | None:
        return self.proc.returncode

    def duration_s(self) -> float:
        return time.monotonic() - self.started

    async def wait(self, timeout_s: float | None = None) -> int | None:
        """The exit code, or None when it is still running after `timeout_s`."""
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            return None

    async def write(self, data: bytes) -> None:
        if self.proc.stdin is None or self.proc.stdin.is_closing():
            raise ProcessError("its input is closed")
        self.proc.stdin.write(data)
        try:
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ProcessError("it is no longer reading its input") from None

    def close_input(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def stop(self, grace_s: float = GRACE_S) -> int | None:
        """SIGTERM to the whole process group, SIGKILL after `grace_s`. Returns the exit code."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        _signal_group(self.proc.pid, signal.SIGTERM)
        code = await self.wait(grace_s)
        if code is None:
            _signal_group(self.proc.pid, signal.SIGKILL)
            code = await self.proc.wait()
        return code


class ProcessError(Exception):
    """A command could not be started or driven; the message says why."""


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pid, sig)  # the child leads its own session, so its group id is its pid


def hit_file_limit(exit_code: int | None) -> bool:
    """Whether the process was killed for writing past its file-size limit (`max_file_bytes`)."""
    return exit_code == -signal.SIGXFSZ


def _file_limit(max_bytes: int) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec: no locks, no allocation-heavy work
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return apply


async def start(settings: Settings, argv: list[str], cwd: Path, log_path: Path, *, stdin: bool,
                max_file_bytes: int | None = None) -> Job:
    """Start `argv` in `cwd`, output appended to `log_path`; with `stdin` its input is a pipe.
    `max_file_bytes` bounds every file the child writes, its output file included (RLIMIT_FSIZE: a write
    past it kills the child with SIGXFSZ), so a command that only prints cannot fill the disk."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    seccomp = settings.socket_filter_fd()
    full = settings.argv(argv, cwd, seccomp)
    limit = _file_limit(max_file_bytes) if max_file_bytes else None
    with log_path.open("ab") as out:  # the child keeps its own copy of the descriptor
        try:
            proc = await asyncio.create_subprocess_exec(
                *full, cwd=str(cwd), env=settings.env(), stdout=out, stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL, start_new_session=True,
                preexec_fn=limit, pass_fds=() if seccomp is None else (seccomp,))
        except OSError as exc:
            raise ProcessError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        finally:
            if seccomp is not None:
                os.close(seccomp)
    return Job(proc, log_path, time.monotonic())


@dataclass
class RunResult:
    exit_code: int | None
    duration_s: float
    timed_out: bool
    output: Output


async def run(settings: Settings, argv: list[str], cwd: Path, log_path: Path, *, timeout_s: float,
              max_bytes: int, max_file_bytes: int | None = None) -> RunResult:
    """Run to completion or until `timeout_s`, then stop it; the output file is removed afterwards."""
    job = await start(settings, argv, cwd, log_path, stdin=False, max_file_bytes=max_file_bytes)
    try:
        code = await job.wait(timeout_s)
        timed_out = code is None
        if timed_out:
            code = await job.stop()
    except asyncio.CancelledError:  # the turn was cancelled (shutdown): do not leave the child behind
        await job.stop(grace_s=1.0)
        raise
    output = await asyncio.to_thread(read_output, log_path, max_bytes)
    await asyncio.to_thread(log_path.unlink, missing_ok=True)
    return RunResult(code, job.duration_s(), timed_out, output)
