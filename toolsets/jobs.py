"""The terminal service: how commands run (settings, allowlist rules) and the background processes Anyy
started, each a store row plus, while this process supervises it, a live `Job`.

The gateway builds one `Terminal` (gateway/services/factory.py) and the `terminal` toolset reaches it through
`ctx.service("terminal")`. At start-up a resident gateway marks rows still `running` from an earlier
process as `lost` (nobody supervises them now); `aclose()` at shutdown stops every live process (TERM,
then KILL after a grace period) and records it as `stopped`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from connectors import processes
from connectors.private_paths import PrivatePaths
from connectors.processes import Job, Settings
from connectors.shellrules import Rule
from store.db import Store
from store.processes import Processes
from store.records import ProcessRecord, iso, utcnow

log = logging.getLogger(__name__)

MAX_BACKGROUND = 16  # background processes running at once, across every session


@dataclass
class Terminal:
    store: Store
    settings: Settings
    logs_dir: Path
    timeout_s: float = 120.0
    rules: tuple[Rule, ...] = ()
    home: str = ""
    private: PrivatePaths = field(default_factory=PrivatePaths)  # what no unapproved command may read
    _live: dict[str, Job] = field(default_factory=dict)
    _watchers: set[asyncio.Task[None]] = field(default_factory=set)
    _ending: dict[str, str] = field(default_factory=dict)  # id -> the state a deliberate stop records
    _polled: dict[str, int] = field(default_factory=dict)  # id -> output bytes already shown by poll

    @property
    def repo(self) -> Processes:
        return Processes(self.store)

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    async def run(self, argv: list[str], timeout_s: float, max_bytes: int,
                  max_file_bytes: int | None = None) -> processes.RunResult:
        """Run in the foreground, in the workspace."""
        name = f"run-{secrets.token_hex(6)}"
        self.settings.workspace.mkdir(parents=True, exist_ok=True)  # created on first use
        return await processes.run(self.settings, argv, self.settings.workspace, self.log_path(name),
                                   timeout_s=timeout_s, max_bytes=max_bytes, max_file_bytes=max_file_bytes)

    async def start(self, session_id: str, user_key: str, command: str, argv: list[str], *,
                    timeout_s: float | None = None, max_file_bytes: int | None = None) -> ProcessRecord:
        """Start a background process owned by `session_id`; its input is a pipe for `process write`.
        With `timeout_s` it is stopped (TERM, then KILL) that long after it started, and recorded as
        `timed_out`. At most `MAX_BACKGROUND` run at once."""
        if len(self._live) >= MAX_BACKGROUND:
            raise processes.ProcessError(f"{MAX_BACKGROUND} background processes are running; stop one first "
                                         "(process action='list', then 'kill')")
        pid_name = f"p{secrets.token_hex(4)}"
        path = self.log_path(pid_name)
        self.settings.workspace.mkdir(parents=True, exist_ok=True)
        job = await processes.start(self.settings, argv, self.settings.workspace, path, stdin=True,
                                    max_file_bytes=max_file_bytes)
        rec = ProcessRecord(id=pid_name, session_id=session_id, user_key=user_key, command=command,
                            cwd=str(self.settings.workspace), pid=job.pid, log_path=str(path), started_at=iso(utcnow()))
        await self.repo.add(rec)
        self._live[rec.id] = job
        task = asyncio.create_task(self._watch(rec.id, job, timeout_s), name=f"process-{rec.id}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        log.info("process_started id=%s session=%s pid=%s", rec.id, session_id, job.pid)
        return rec

    async def _watch(self, process_id: str, job: Job, timeout_s: float | None) -> None:
        code = await job.wait(timeout_s)
        if code is None:  # its timeout passed
            self._ending.setdefault(process_id, "timed_out")
            code = await job.stop()
        state = self._ending.pop(process_id, "exited")
        await self.repo.finish(process_id, state, code)
        self._live.pop(process_id, None)
        log.info("process_ended id=%s state=%s exit=%s", process_id, state, code)

    def job(self, process_id: str) -> Job | None:
        return self._live.get(process_id)

    async def stop(self, process_id: str, state: str = "killed") -> int | None:
        """Stop a live process (TERM, then KILL) and record `state`; its watcher writes the row."""
        job = self._live.get(process_id)
        if job is None:
            return None
        self._ending[process_id] = state
        code = await job.stop()
        await self.repo.finish(process_id, state, code)
        return code

    def new_output(self, process_id: str, path: Path, max_bytes: int) -> processes.Output:
        """Output written since the last poll of this process."""
        out = processes.read_output(path, max_bytes, self._polled.get(process_id, 0))
        self._polled[process_id] = out.total_bytes
        return out

    async def recover(self) -> int:
        """Mark processes an earlier gateway left running as `lost`. Returns how many."""
        lost = await self.repo.mark_lost(keep=set(self._live))
        for row in lost:
            log.warning("process_lost id=%s pid=%s session=%s", row["id"], row["pid"], row["session_id"])
        return len(lost)

    async def aclose(self) -> None:
        """Shutdown: stop every live process and record it as `stopped`."""
        await asyncio.gather(*(self.stop(pid, "stopped") for pid in list(self._live)), return_exceptions=True)
        for task in list(self._watchers):
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
