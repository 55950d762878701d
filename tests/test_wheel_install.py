"""One command to install: what `pipx install` / `uv tool install` do is build the wheel and install it into
a venv of its own. Here: the wheel is built (with build isolation, as pipx and uv build it), its contents
checked (package data, the console script), and it is installed into a fresh venv, where `anyy setup --yes`
and then `anyy doctor` run from a folder outside the worktree.

The venv gets the wheel with `--no-deps` and reaches the project's installed dependencies through a .pth
line (the plain folder: none of the editable install's hooks run), because installing ~60 dependencies
takes a minute or more even from a warm cache; tests/test_fresh_install.py (marked slow) installs
everything from the registry. What this test proves is the wheel itself: Anyy's own code and data come
from the venv, not from the worktree.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.model import tool_call
from tests.test_fresh_install import ROOT, run, source_copy

PACKAGE_DATA = ["gateway/setup/slack_manifest.yaml", "gateway/selection/vectors.bin",
                "gateway/selection/VECTORS.md", "gateway/dashboard/templates/base.html"]


@pytest.mark.timeout(600)
async def test_the_built_wheel_installs_and_sets_up_outside_the_worktree(tmp_path, home, model):
    out = tmp_path / "dist"
    await run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check", "-w", out,
              source_copy(tmp_path / "src"))
    [wheel] = out.glob("anyy-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert all(name in names for name in PACKAGE_DATA), sorted(n for n in names if not n.endswith(".py"))
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "anyy = gateway.cli.main:main" in zipfile.ZipFile(wheel).read(entry).decode()

    venv = tmp_path / "venv"
    await run(sys.executable, "-m", "venv", "--without-pip", venv)
    await run(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet", "--no-deps",
              "--disable-pip-version-check", wheel)
    [site] = (venv / "lib").glob("python3*/site-packages")
    (site / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in home.items() if k != "PYTHONPATH"} | {"MODEL_KEY": "sk-wheel-1234"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = await run(venv / "bin/python", "-c", "import gateway, sys; print(gateway.__file__)", env=env,
                      cwd=elsewhere)
    assert where.strip().startswith(str(site)) and not where.startswith(str(ROOT)), where

    model.script(tool_call("setup_check", {"ok": True}))
    said = await run(venv / "bin/anyy", "setup", "--yes", "--model-provider", "custom", "--model-url",
                     model.url_openai, "--model", "fake-1", "--model-key-env", "MODEL_KEY", "--timezone", "UTC",
                     env=env, cwd=elsewhere)
    assert "Model: works, calls tools" in said and "All good." in said, said
    env.pop("MODEL_KEY")  # from now on the key comes from secrets.env only
    doctor = await run(venv / "bin/anyy", "doctor", env=env, cwd=elsewhere)
    assert "✓ model: openai fake-1" in doctor and "All good." in doctor, doctor
    assert os.stat(Path(home["HOME"]) / ".config/anyy/secrets.env").st_mode & 0o077 == 0
