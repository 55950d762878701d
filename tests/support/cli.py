"""Running the `anyy` command in tests: a subprocess with its own HOME and data directory."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

ANYY = [sys.executable, "-m", "gateway.cli"]
# How long a fresh `anyy` process may take to start and do one thing. Starting alone (imports) took
# 15-20 s on a loaded 2-core box, which left deadlines near 30 s little margin; a generous one costs
# nothing when the test passes.
SUBPROCESS_S = 120.0


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def model_config(tmp_path: Path, model: Any, more: str = "") -> str:
    """A config with the fake model (no retries, so failures show at once) and the TOML in `more`."""
    return write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\n'
                                  f"timeout_s = 10\nmax_retries = 0\n\n{more}")


async def anyy(*args: str, env: dict[str, str], stdin: str = "", timeout: float = SUBPROCESS_S) -> tuple[int, str, str]:
    """Run `anyy ARGS`, feeding `stdin`; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(*ANYY, *args, env=env, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    return proc.returncode or 0, out.decode(), err.decode()
