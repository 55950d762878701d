"""The console surface: a terminal chat. Interactive on a TTY; line-per-message when piped."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from gateway.surfaces.base import GatewayPort, Surface
from store.records import Inbound, Origin, OutboxItem

CHAT_ID = "local"


class ConsoleSurface(Surface):
    name = "console"
    has_buttons = False
    max_text = 1_000_000

    def __init__(self, user_id: str = "owner", out: TextIO | None = None) -> None:
        self.user_id = user_id
        self.out = out or sys.stdout
        self._ids = itertools.count(1)
        self.origin = Origin(surface=self.name, chat_id=CHAT_ID)
        self.gateway: GatewayPort | None = None

    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway

    async def stop(self) -> None:
        self.gateway = None

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        text = item.outbound.text
        if edit_platform_id is not None:
            text = f"(update to message {edit_platform_id}) {text}"
        if item.outbound.attachment is not None:  # a terminal cannot play it: say where it is
            saved = f"[{item.outbound.attachment.name} saved at {item.outbound.attachment.path}]"
            text = f"{text}\n{saved}" if text.strip() else saved
        platform_id = str(next(self._ids))
        self.out.write(f"anyy> {text}\n" if self.out.isatty() else f"{text}\n")
        self.out.flush()
        return platform_id

    async def send_line(self, line: str) -> None:
        """Hand one typed line to the gateway as a message from the console owner."""
        assert self.gateway is not None
        await self.gateway.receive(Inbound(surface=self.name, chat_id=CHAT_ID, user_id=self.user_id, text=line))

    async def read_lines(self, settle: Callable[[], Awaitable[None]], stdin: TextIO | None = None) -> None:
        """Read until end of input. readline runs in a thread so the event loop keeps serving
        replies and reminders while the person is typing. When piped, each line's replies are
        printed (`settle`) before the next line is read, so scripted output is in order."""
        stdin = stdin or sys.stdin
        interactive = stdin.isatty()
        while True:
            if interactive:
                self.out.write("you> ")
                self.out.flush()
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                return
            if line.strip():
                await self.send_line(line.rstrip("\n"))
                if not interactive:
                    await settle()
