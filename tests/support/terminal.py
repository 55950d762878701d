"""A child process on a pseudo-terminal, read the way a person sees it (escape sequences removed)."""

from __future__ import annotations

import asyncio
import os
import re

from tests.support.cli import SUBPROCESS_S

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[>=()][0-9A-Za-z]?|\r")


class Terminal:
    """A child process on a pty; everything it prints is kept."""

    def __init__(self, master: int, process: asyncio.subprocess.Process) -> None:
        self.master, self.process, self.raw = master, process, ""

    async def expect(self, pattern: str, timeout: float = SUBPROCESS_S) -> str:
        """Read until `pattern` (a regex) matches the output without escape sequences; returns that text."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not re.search(pattern, plain := ANSI.sub("", self.raw), re.S):
            if loop.time() > deadline:
                raise AssertionError(f"no {pattern!r} in {plain!r}")
            readable = asyncio.Event()
            loop.add_reader(self.master, readable.set)
            try:
                await asyncio.wait_for(readable.wait(), max(0.1, deadline - loop.time()))
            except TimeoutError:
                continue
            finally:
                loop.remove_reader(self.master)
            try:
                self.raw += os.read(self.master, 65536).decode(errors="replace")
            except OSError:  # the child closed the terminal
                break
        return ANSI.sub("", self.raw)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())
