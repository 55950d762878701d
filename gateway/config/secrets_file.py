"""secrets.env: the owner's secrets, beside the config file, one `NAME=value` a line.

`anyy setup` writes it; every `anyy` command loads it at start (`load_secrets`), and the systemd unit
names it as its `EnvironmentFile`, so both read the same values. A variable already set in the environment
wins over the file, so `FOO=x anyy chat` still tries x. The format is the subset systemd's
EnvironmentFile and a POSIX shell's `set -a; . secrets.env` both read the same way: `NAME=value`, `#`
comments on their own line, values single-quoted when they hold anything but safe characters.

The file is created with mode 0600 by `open(O_CREAT | O_EXCL, 0o600)` under a temporary name and renamed
over the old one, so there is no moment at which it exists readable by others, and a crash mid-write
leaves the previous file whole.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

FILE_NAME = "secrets.env"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]*\Z")


class SecretsError(Exception):
    """secrets.env cannot be read or written; the message names the file and the line."""


def secrets_path(config_file: Path) -> Path:
    """secrets.env sits beside the config file (`~/.config/anyy/` by default, or `--config`'s folder)."""
    return config_file.parent / FILE_NAME


def read_secrets(path: Path) -> dict[str, str]:
    """The variables of `path` ({} when there is none). Raises SecretsError for a line that is not
    `NAME=value`, naming the line but never its value."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SecretsError(f"{path}: cannot read: {exc.strerror}") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name):
            raise SecretsError(f"{path}, line {number}: expected NAME=value")
        values[name] = _unquote(value.strip())
    return values


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("'\\''", "'") if value[0] == "'" else inner.replace('\\"', '"').replace("\\\\", "\\")
    return value


def _quote(value: str) -> str:
    if _SAFE.match(value):
        return value
    if "\n" in value or "\r" in value:
        raise SecretsError("a secret cannot span lines")
    return "'" + value.replace("'", "'\\''") + "'"


def load_secrets(path: Path) -> list[str]:
    """Put the variables of `path` into this process's environment, except those already set there;
    returns the names it set. Called by every `anyy` command before it reads the config."""
    loaded = []
    for name, value in read_secrets(path).items():
        if name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return loaded


def save_secrets(path: Path, updates: dict[str, str]) -> None:
    """Set `updates` in `path` (created if missing), keeping its other lines, comments and order. A name
    that is not a variable name (letters, digits, '_'; not starting with a digit) is refused before
    anything is written: every later `anyy` command would fail reading the file."""
    if bad := [name for name in updates if not _NAME.match(name)]:
        raise SecretsError(f"{path}: {', '.join(repr(n) for n in bad)} is not a variable name (letters, digits "
                           "and '_', not starting with a digit); nothing was written")
    lines: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = ["# Anyy's secrets (anyy setup writes them; one NAME=value a line). Keep this file 0600."]
    except OSError as exc:
        raise SecretsError(f"{path}: cannot read: {exc.strerror}") from None
    pending = dict(updates)
    for i, line in enumerate(lines):
        name = line.strip().removeprefix("export ").partition("=")[0].strip()
        if name in pending:
            lines[i] = f"{name}={_quote(pending.pop(name))}"
    lines += [f"{name}={_quote(value)}" for name, value in pending.items()]
    write_private(path, "\n".join(lines) + "\n")


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable and writable by the owner only from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:  # left by a process killed mid-write (same pid reused): not ours to trust
        temp.unlink()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may only have narrowed it; make it exactly 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def readable_by_others(path: Path) -> bool:
    """The file exists and its group or others may read it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))
