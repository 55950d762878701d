"""The console surface: a terminal chat. Interactive on a TTY; line-per-message when piped.

A streamed reply is printed as it arrives: each rewrite of the message that only adds to the text prints
what was added, and the line ends when the reply is complete. Control characters are printed as their
escapes (`\x1b`, `\r`), so no text can move the cursor or rewrite what the owner sees.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from gateway.surfaces.base import GatewayPort, LiveSettings, Surface
from store.records import Inbound, Origin, OutboxItem
from toolsets.controls import visible

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
        self._printed: dict[str, str] = {}  # message id -> text printed so far, while a reply streams

    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway

    async def stop(self) -> None:
        self.gateway = None

    def live(self, origin: Origin) -> LiveSettings:
        """Print as the text arrives (a terminal has no rate limit; 20 writes a second is smooth)."""
        return LiveSettings(interval_s=0.05, max_chars=self.max_text - 1, first_chars=1, marks_partial=True)

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        out = item.outbound
        body = out.text
        if out.attachment is not None:  # a terminal cannot play it: say where it is
            saved = f"[{out.attachment.name} saved at {out.attachment.path}]"
            body = f"{body}\n{saved}" if body.strip() else saved
        end = "" if out.partial else "\n"
        printed = self._printed.pop(edit_platform_id, None) if edit_platform_id is not None else None
        if printed is not None and body.startswith(printed):
            platform_id, text = edit_platform_id, body[len(printed):] + end  # the streamed reply goes on
        else:
            platform_id, text = str(next(self._ids)), body + end
            if printed is not None:  # the text changed rather than grew: start a fresh line
                text = "\n" + text
            if edit_platform_id is not None and printed is None:
                text = f"(update to message {edit_platform_id}) {text}"
            if self.out.isatty():
                text = "anyy> " + text
        if out.partial:
            self._printed[platform_id] = body
        self.out.write(visible(text))  # a terminal obeys escape sequences: none reaches it unseen
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
