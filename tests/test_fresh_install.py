"""A fresh `pip install .` with the pip a new venv ships (23.x): web_fetch's extractor works and doctor
says so. Slow (a venv and every dependency from PyPI, about a minute with a warm pip cache): the one test
marked `slow`; `pytest -m 'not slow'` leaves it out."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "connectors", "toolsets", "store")


async def run(*argv: str | Path, env: dict[str, str] | None = None, timeout: float = 900,
              cwd: Path | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(*map(str, argv), env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{text[-3000:]}"
    return text


def source_copy(source: Path) -> Path:
    """The project's files a build reads, copied: building in the worktree would leave build/ and *.egg-info
    there."""
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    return source


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_pip_install_with_the_venv_pip_gives_a_working_web_fetch(tmp_path, home):
    source = source_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    await run(sys.executable, "-m", "venv", venv)  # with its bundled pip, deliberately not upgraded
    await run(venv / "bin/pip", "install", "--quiet", "--disable-pip-version-check", source)
    await run(venv / "bin/python", "-c", "from connectors.web import extractor_problem as p; "
                                         "import sys; sys.exit(p())")
    proc = await asyncio.create_subprocess_exec(str(venv / "bin/anyy"), "doctor", env=home,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, _ = await asyncio.wait_for(proc.communicate(), 300)
    out = stdout.decode()
    assert "✓ web: fetch:" in out, out  # doctor's exit code is 1 here: no model is configured
