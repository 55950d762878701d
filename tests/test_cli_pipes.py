"""`anyy … | head`: a command whose reader has gone away ends quietly, as `cat` does, never with a traceback."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.support.cli import ANYY, SUBPROCESS_S


async def run_into_a_closed_pipe(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `anyy ARGS` with stdout a pipe whose reader is already gone (so the first write fails, whatever
    the pipe's buffer), returning the exit code and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = await asyncio.create_subprocess_exec(*ANYY, *args, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=write_end, stderr=asyncio.subprocess.PIPE)
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(proc.communicate(), SUBPROCESS_S)
    return proc.returncode or 0, err.decode()


@pytest.mark.parametrize("args", [("tools",), ("tools", "--json"), ("--help",), ("doctor",)],
                         ids=["tools", "tools-json", "help", "doctor"])
async def test_a_reader_that_goes_away_ends_the_command_quietly(args: tuple[str, ...], home: dict[str, str]) -> None:
    code, err = await run_into_a_closed_pipe(*args, env=home)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    # 1 is what Python's own recipe exits with, so a script's pipefail still sees it; argparse's help
    # ignores a failed write itself and exits 0.
    assert code == (0 if args == ("--help",) else 1), err
