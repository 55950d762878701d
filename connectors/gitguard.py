"""Running an allowlisted `git status|diff|log` so that the repository cannot make it run programs.

A repository's config (and any file it includes) can name programs that plain reads run: a clean filter
(`filter.<driver>.clean` with a `.gitattributes` line) runs on `git status` and `git diff`, `gpg.program`
on `git log --show-signature` (or `log.showSignature = true`, or a `%G?` format), `core.fsmonitor` on every
index refresh. Command-line `-c` settings override every config file, so the allowlisted command gets:

- fixed overrides (`SAFETY`) for the settings whose names are known: fsmonitor, pager, hooks, external
  diff, signature checking, every transport (a partial clone would otherwise fetch lazily over ssh);
- for each filter and diff driver the repository's config names (listed with `git config --list
  --name-only`, which runs nothing), its program settings emptied and `required` turned off, so git
  falls back to the file's content as it is;
- `--no-optional-locks`, so `git status` does not write the index either.

`SAFETY` is part of the argument vector the classifier returns (connectors/shellrules.py); the driver
overrides need the repository, so `disarmed` adds them right before the command runs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path

SAFETY = [
    "--no-optional-locks", "-c", "core.fsmonitor=", "-c", "core.pager=cat", "-c", "core.hooksPath=/dev/null",
    "-c", "diff.external=",
    "-c", "log.showSignature=false", "-c", "gpg.program=", "-c", "gpg.openpgp.program=",
    "-c", "gpg.x509.program=", "-c", "gpg.ssh.program=", "-c", "protocol.allow=never",
    "-c", "diff.ignoreSubmodules=all", "-c", "status.submoduleSummary=false",
]
ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
_DRIVER = re.compile(r"^(filter|diff)\.(.+)\.[a-z]+$", re.IGNORECASE)
_EMPTIED = {"filter": ("clean", "smudge", "process"), "diff": ("command", "textconv")}
LIST_TIMEOUT_S = 10.0


def driver_overrides(names: list[str]) -> list[str]:
    """The `-c` settings that disarm every filter and diff driver among config key `names`."""
    drivers = {(m.group(1).lower(), m.group(2)) for m in map(_DRIVER.match, names) if m}
    out: list[str] = []
    for kind, name in sorted(drivers):
        out += [arg for key in _EMPTIED[kind] for arg in ("-c", f"{kind}.{name}.{key}=")]
        if kind == "filter":
            out += ["-c", f"filter.{name}.required=false"]
    return out


async def config_names(cwd: Path, env: Mapping[str, str]) -> list[str]:
    """Every config key git sees in `cwd` (system, global, the repository's, included files)."""
    proc = await asyncio.create_subprocess_exec(
        "git", "config", "--list", "--name-only", "-z", cwd=str(cwd), env={**env, **ENV},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), LIST_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return [n for n in out.decode("utf-8", "replace").split("\0") if n]


async def disarmed(argv: list[str], cwd: Path, env: Mapping[str, str]) -> list[str]:
    """`argv` (an allowlisted `git ...`, `SAFETY` included) with every filter and diff driver the
    repository's config names switched off too."""
    return [argv[0], *driver_overrides(await config_names(cwd, env)), *argv[1:]]
