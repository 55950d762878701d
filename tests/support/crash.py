"""`anyy chat` / `anyy run` children that a test stops with kill -9 at a named step.

A child started with `pause_at=STEP` stops at that step (`gateway.checkpoints`) and says so on stderr;
`wait_paused()` waits for that line, so the kill lands exactly there, with no sleeps.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field

from tests.support.cli import ANYY, SUBPROCESS_S


@dataclass
class Child:
    process: asyncio.subprocess.Process
    stderr_lines: list[str] = field(default_factory=list)

    async def wait_for_stderr(self, text: str, timeout: float = SUBPROCESS_S) -> None:
        """Read stderr until a line contains `text`."""
        assert self.process.stderr is not None

        async def read() -> None:
            while not any(text in line for line in self.stderr_lines):
                line = await self.process.stderr.readline()  # type: ignore[union-attr]
                if not line:
                    raise AssertionError(f"the child exited before {text!r}: {''.join(self.stderr_lines)}")
                self.stderr_lines.append(line.decode(errors="replace"))

        await asyncio.wait_for(read(), timeout)

    async def wait_paused(self, step: str, timeout: float = SUBPROCESS_S) -> None:
        await self.wait_for_stderr(f"anyy: paused at {step}", timeout)

    async def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def terminate(self, timeout: float = SUBPROCESS_S) -> int:
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), timeout)


async def start(command: str, cfg: str, env: dict[str, str], *, lines: list[str] = (),  # type: ignore[assignment]
                pause_at: str | None = None, close_stdin: bool = True) -> Child:
    """Start `anyy COMMAND --config CFG`, write `lines` to its stdin (then close it)."""
    child_env = {**env, **({"ANYY_PAUSE_AT": pause_at} if pause_at else {})}
    process = await asyncio.create_subprocess_exec(
        *ANYY, command, "--config", cfg, env=child_env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdin is not None
    for line in lines:
        process.stdin.write(f"{line}\n".encode())
    await process.stdin.drain()
    if close_stdin:
        process.stdin.close()
    return Child(process)


async def chat_once(cfg: str, env: dict[str, str], *lines: str, timeout: float = SUBPROCESS_S) -> str:
    """Run `anyy chat` to the end with these lines; returns its stdout (it must exit cleanly)."""
    child = await start("chat", cfg, env, lines=list(lines))
    out, err = await asyncio.wait_for(child.process.communicate(), timeout)
    assert child.process.returncode == 0, err.decode()
    return out.decode()
