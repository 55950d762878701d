"""Which shell commands may run without the owner's approval, and which no hook may ever wave through.

`classify(command)` puts a command in one of three classes:

- `allow`: a read-only command from the allowlist (`ls`, `cat`, `head`, `tail`, `wc`, `df`, `du`,
  `grep`/`rg`/`find` without their executing or writing options, `git status|diff|log` in read-only
  forms, plus operator rules) with no shell metacharacters. It runs as an argument vector, without a
  shell, so what was classified is exactly what runs; git gets `connectors.gitguard.SAFETY` and
  `--no-ext-diff --no-textconv` so a repository's config cannot make it run programs (the terminal adds
  the overrides for the repository's own filter and diff drivers when it runs it).
- `force`: a destructive pattern (`rm -r` on `/`, `~`, the workspace or a top-level directory, `mkfs`,
  `dd of=/dev/...`, a fork bomb, a download piped into a shell, recursive `chmod`/`chown` of `/` or `~`,
  anything naming `~/.ssh` or a shell rc file). It needs the owner's approval even with a policy hook.
- `change_plan`: everything else; it runs under `bash -c` after the owner approves the exact command.

Pure functions of the command text: no I/O, no environment.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath

from connectors.gitguard import SAFETY


class ShellClass(StrEnum):
    ALLOW = "allow"
    CHANGE_PLAN = "change_plan"
    FORCE = "force"


@dataclass(frozen=True)
class Rule:
    """An operator allowlist rule: `program` [`subcommand`] followed by any metacharacter-free arguments."""

    program: str
    subcommand: str | None = None


@dataclass(frozen=True)
class Verdict:
    kind: ShellClass
    reason: str
    argv: list[str] = field(default_factory=list)  # for `allow`: what to execute, without a shell


# Outside quotes these make bash do something beyond running one program with literal arguments.
_META = set(";&|<>()$`\\\n\r{}*?[]!")
_META_IN_DOUBLE = set("$`\\!")
_READERS = {"ls", "cat", "head", "tail", "wc", "df", "du", "grep"}
_FIND_BAD = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
_RG_BAD = ("--pre", "--hostname-bin", "--search-zip", "-z", "--follow", "-L")
_GIT_STATUS_OK = {"--short", "-s", "--porcelain", "--porcelain=v1", "--porcelain=v2", "-b", "--branch"}
_GIT_BAD = ("--output", "--ext-diff", "--textconv", "--ignore-submodules", "--submodule", "--paginate")
_WRAPPERS = {"sudo", "doas", "command", "exec", "nohup", "env", "time", "nice", "xargs", "builtin", "busybox"}

_PROTECTED = re.compile(r"\.ssh\b|authorized_keys|\.(?:bash|zsh|k|tcsh|c)shrc\b|\.bashrc\b|\.zshrc\b|\.bash_profile\b"
                        r"|\.bash_login\b|\.bash_logout\b|(?<![\w.])\.profile\b|\.zprofile\b|\.zshenv\b|\.zlogin\b"
                        r"|config\.fish\b|/etc/profile\b|/etc/bash\.bashrc\b")
_FORK_BOMB = re.compile(r"(\S+)\s*\(\s*\)\s*\{[^}]*?\1\s*\|\s*&?\s*\1")
_PIPE_TO_SHELL = re.compile(r"\b(?:curl|wget|fetch)\b.*\|\s*(?:sudo\s+)?(?:\S*/)?(?:(?:ba|z|da|k|c|tc|fi)?sh|python\d?"
                            r"|perl|ruby|node)\b")
_SUBST_DOWNLOAD = re.compile(r"(?:\$\(|<\(|`)\s*(?:curl|wget|fetch)\b")
_RAW_DEVICE = re.compile(r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-)")
_SEGMENT_SPLIT = re.compile(r"\|\||&&|[;|&\n()`{}]|\$\(|<\(")


def classify(command: str, rules: list[Rule] | tuple[Rule, ...] = (), *, workspace: str = "",
             home: str = "") -> Verdict:
    """Classify one command (see the module docstring). `workspace` and `home` are absolute paths that
    `rm -r` must never target."""
    danger = _destructive(command, workspace.rstrip("/"), home.rstrip("/"), depth=0)
    if danger:
        return Verdict(ShellClass.FORCE, danger)
    meta = _metacharacter(command)
    if meta:
        return Verdict(ShellClass.CHANGE_PLAN, meta)
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return Verdict(ShellClass.CHANGE_PLAN, f"cannot be parsed ({exc})")
    if not argv:
        return Verdict(ShellClass.CHANGE_PLAN, "empty command")
    return _allowlisted(argv, rules)


def _metacharacter(command: str) -> str:
    """Why the command's text is not a plain argument vector, or '' when it is."""
    quote = ""
    word_start = True
    for ch in command:
        if quote == "'":
            if ch == "'":
                quote = ""
            continue
        if quote == '"':
            if ch == '"':
                quote = ""
            elif ch in _META_IN_DOUBLE:
                return f"contains {ch!r} inside double quotes (bash expands it)"
            continue
        if ch in "'\"":
            quote, word_start = ch, False
            continue
        if ch in _META:
            return f"contains the shell metacharacter {ch!r}"
        if ch == "~" and word_start:
            return "a word starts with '~' (bash expands it)"
        word_start = ch in " \t"
    if quote:
        return "has an unterminated quote"
    return ""


def _allowlisted(argv: list[str], rules: list[Rule] | tuple[Rule, ...]) -> Verdict:
    prog, args = argv[0], argv[1:]
    for rule in rules:
        if prog == rule.program and (rule.subcommand is None or (args[:1] == [rule.subcommand])):
            return Verdict(ShellClass.ALLOW, f"operator rule {rule.program} {rule.subcommand or ''}".strip(), argv)
    if prog == "grep" and any(a == "--dereference-recursive" or _short_flag(a, "R") for a in args):
        return _refused("grep -R follows symlinks out of the folder it searches")
    if prog in _READERS:
        return Verdict(ShellClass.ALLOW, f"read-only {prog}", argv)
    if prog == "find":
        bad = next((a for a in args if a in _FIND_BAD), None)
        return _refused(f"find {bad} runs or writes") if bad else Verdict(ShellClass.ALLOW, "read-only find", argv)
    if prog == "rg":
        bad = next((a for a in args if a.startswith(_RG_BAD)), None)
        return _refused(f"rg {bad} runs other programs") if bad else Verdict(ShellClass.ALLOW, "read-only rg", argv)
    if prog == "git":
        return _git(args)
    return _refused(f"{prog} is not on the read-only allowlist")


def _git(args: list[str]) -> Verdict:
    sub, rest = (args[0], args[1:]) if args else ("", [])
    if sub == "status":
        if all(a in _GIT_STATUS_OK for a in rest):
            return Verdict(ShellClass.ALLOW, "read-only git status", ["git", *SAFETY, "status", *rest])
        return _refused("git status with options beyond --short/--porcelain/--branch")
    if sub in ("diff", "log"):
        bad = next((a for a in rest if a.startswith(_GIT_BAD)), None)
        if bad:
            return _refused(f"git {sub} {bad} can write files or run programs")
        return Verdict(ShellClass.ALLOW, f"read-only git {sub}",
                       ["git", *SAFETY, sub, "--no-ext-diff", "--no-textconv", *rest])
    return _refused("only git status, diff and log are read-only")


def _short_flag(arg: str, flag: str) -> bool:
    """Whether `arg` is a group of short options (`-rnR`) that contains `flag`."""
    return arg.startswith("-") and not arg.startswith("--") and flag in arg[1:]


def _refused(reason: str) -> Verdict:
    return Verdict(ShellClass.CHANGE_PLAN, reason)


def _destructive(command: str, workspace: str, home: str, depth: int) -> str:
    """Why the command is destructive, or ''. Quoted strings are checked as commands too, so
    `bash -c "rm -rf ~"` is caught like `rm -rf ~`."""
    if _PROTECTED.search(command):
        return "touches ~/.ssh or a shell start-up file"
    if _FORK_BOMB.search(command):
        return "looks like a fork bomb"
    if _PIPE_TO_SHELL.search(command) or _SUBST_DOWNLOAD.search(command):
        return "runs a downloaded script"
    if _RAW_DEVICE.search(command):
        return "writes to a raw disk device"
    for segment in _SEGMENT_SPLIT.split(command):
        words = _words(segment)
        reason = _destructive_words(words, workspace, home)
        if reason:
            return reason
        if depth < 3:
            for w in words:
                if any(c in w for c in " \t;|&"):
                    reason = _destructive(w, workspace, home, depth + 1)
                    if reason:
                        return reason
    return ""


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _destructive_words(words: list[str], workspace: str, home: str) -> str:
    while words and (PurePosixPath(words[0]).name in _WRAPPERS or "=" in words[0] or words[0].startswith("-")):
        words = words[1:]  # `sudo -n rm`, `env X=1 rm`, `xargs rm`: look at the program they run
    if not words:
        return ""
    prog, args = PurePosixPath(words[0]).name, words[1:]
    if prog.startswith("mkfs") or prog in ("mke2fs", "mkswap", "wipefs"):
        return f"{prog} formats a filesystem"
    if prog == "dd" and any(a.startswith("of=/dev/") for a in args):
        return "dd writes to a device"
    flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    long_flags = {a for a in args if a.startswith("--")}
    recursive = "r" in flags or "R" in flags or "--recursive" in long_flags
    targets = [a for a in args if not a.startswith("-")]
    if prog == "rm" and (recursive or "--no-preserve-root" in long_flags):
        hit = next((t for t in targets if _precious(t, workspace, home)), None)
        if hit is not None:
            return f"rm -r of {hit}"
    if prog in ("chmod", "chown", "chgrp") and recursive:
        hit = next((t for t in targets[1:] if _precious(t, workspace, home)), None)
        if hit is not None:
            return f"recursive {prog} of {hit}"
    return ""


def _precious(target: str, workspace: str, home: str) -> bool:
    """`/`, a top-level directory, the home directory or the workspace (or everything in them)."""
    t = target.strip()
    for suffix in ("/*", "/.*", "/"):
        if t.endswith(suffix) and t != "/":
            t = t[: -len(suffix)] or "/"
            break
    if t in ("", "/", "~", "$HOME", "${HOME}", ".", "..", "*", ".*") or (t.startswith("~") and "/" not in t):
        return True
    if re.fullmatch(r"/[^/]+", t):  # /etc, /usr, /home, ...
        return True
    return t in {p for p in (workspace, home) if p}
