"""The systemd unit docs/deploy.md tells the owner to copy: systemd accepts it, and it means what it says."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"


def unit_text() -> str:
    block = re.search(r"```ini\n(# ~/.config/systemd/user/anyy.service\n.*?)```", DEPLOY.read_text(), re.S)
    assert block, "docs/deploy.md lost its systemd unit"
    return block.group(1)


def settings(text: str) -> dict[str, list[str]]:
    """Key=value lines as systemd reads them: '#' or ';' starts a comment only at the start of a line."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_every_path_is_only_a_path_and_the_unit_is_hardened():
    unit = settings(unit_text())
    for key in ("EnvironmentFile", "ExecStart", "WorkingDirectory", "ReadWritePaths"):
        for value in unit[key]:
            # A trailing "# comment" is part of the value for systemd: the file would not be found.
            assert "#" not in value and (key == "ExecStart" or " " not in value), f"{key}={value}"
    assert unit["Restart"] == ["on-failure"]
    assert unit["NoNewPrivileges"] == ["true"] and unit["PrivateTmp"] == ["true"]
    assert unit["ProtectSystem"] == ["strict"] and unit["ReadWritePaths"] == ["%h/.local/share/anyy"]


async def test_systemd_analyze_verifies_the_unit(tmp_path):
    home = tmp_path
    program = home / "anyy/.venv/bin/anyy"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    unit = tmp_path / "anyy.service"
    unit.write_text(unit_text().replace("%h", str(home)))
    proc = await asyncio.create_subprocess_exec("systemd-analyze", "verify", "--man=no", str(unit),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    lines = [line for line in out.decode().splitlines() if "anyy.service" in line]
    assert proc.returncode == 0 and not lines, out.decode()
