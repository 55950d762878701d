"""`anyy run` as a subprocess for end-to-end tests: a config pointing at the fake model plus one surface
section, and a process that is always stopped (SIGTERM, then kill) and whose output is kept."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cli import SUBPROCESS_S


def run_config(tmp_path: Path, model: Any, surface_section: str, dashboard_listen: str | None = None) -> Path:
    """Write a config for the fake model, a store in `tmp_path`, and `surface_section` (TOML text). The
    dashboard is off unless `dashboard_listen` is given (its default port is not the test's to take)."""
    dashboard = f'listen = "{dashboard_listen}"' if dashboard_listen else "enabled = false"
    path = tmp_path / "config.toml"
    path.write_text(f"""
[model]
base_url = "{model.url_openai}"
model = "fake-1"
timeout_s = 5
max_retries = 1

[store]
path = "{tmp_path / 'anyy.db'}"

[dashboard]
{dashboard}

{surface_section}
""", encoding="utf-8")
    return path


@dataclass
class Resident:
    process: asyncio.subprocess.Process
    log_path: Path

    async def terminate(self, timeout: float = SUBPROCESS_S) -> int:
        """SIGTERM and wait: the exit code of a graceful shutdown."""
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), timeout)

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8")


@contextlib.asynccontextmanager
async def resident(tmp_path: Path, config: Path, secrets: dict[str, str]) -> AsyncIterator[Resident]:
    """Start `anyy run --config CONFIG` with its own data directory and these secret env variables."""
    env = {**os.environ, **secrets, "ANYY_HOME": str(tmp_path / "home"),
           "ANYY_TOOL_RESULTS_DIR": str(tmp_path / "results")}
    log_path = tmp_path / "anyy.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "run", "--config", str(config), env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        try:
            yield Resident(process, log_path)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
