"""The console surface: a terminal chat. Interactive on a TTY; line-per-message when piped.

A streamed reply is printed as it arrives: each rewrite of the message that only adds to the text prints
what was added, and the line ends when the reply is complete. Control characters in what is printed are
shown as their escapes (`\x1b`, `\r`), so no text can move the cursor or rewrite what the owner sees
(the spinner's own escapes are ours). Markdown shows as its source, with its text unescaped
(gateway/surfaces/markdown_source.py): outside text in a reminder reads as written, without backslashes.

On a TTY the prompt is prompt_toolkit's (`gateway.surfaces.prompt`): line editing, history kept in the
data directory, and the next `you> ` only once the reply is there. While a turn runs, a spinner turns on
the line below and each tool the model calls gets a progress line. Piped input stays plain: no prompt,
no spinner, one reply per line, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gateway.surfaces.base import GatewayPort, LiveSettings, Surface
from store.records import Inbound, Origin, OutboxItem
from toolsets.controls import visible

if TYPE_CHECKING:
    from gateway.surfaces.prompt import Prompt

CHAT_ID = "local"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_S = 0.1
_CLEAR = "\r\x1b[K"  # back to the line start, erase it: where the spinner was
# What CommonMark reads as something else than its characters in text: a backslash escape, an entity.
_UNESCAPES = re.compile(r"\\[!-/:-@\[-`{-~]|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


class ConsoleSurface(Surface):
    name = "console"
    has_buttons = False
    max_text = 1_000_000

    def __init__(self, user_id: str = "owner", out: TextIO | None = None, history: Path | None = None) -> None:
        self.user_id = user_id
        self._out = out
        self.history = history  # the prompt's history file (interactive only)
        self._ids = itertools.count(1)
        self.origin = Origin(surface=self.name, chat_id=CHAT_ID)
        self.gateway: GatewayPort | None = None
        self._printed: dict[str, str] = {}  # message id -> text printed so far, while a reply streams
        self._spinning = False  # a spinner frame is on the current line
        self._prompt: Prompt | None = None  # a person at a TTY (read_lines chose the prompt)

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    @property
    def _turn_on_screen(self) -> bool:
        """A person at a TTY waits for a turn (no prompt shown): the spinner and tool lines are for them."""
        return self._prompt is not None and not self._prompt.shown

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway

    async def stop(self) -> None:
        self.gateway = None

    def live(self, origin: Origin) -> LiveSettings:
        """Print as the text arrives (a terminal has no rate limit; 20 writes a second is smooth)."""
        return LiveSettings(interval_s=0.05, max_chars=self.max_text - 1, first_chars=1, marks_partial=True)

    @contextlib.asynccontextmanager
    async def progress(self, origin: Origin, platform_message_id: str | None) -> AsyncIterator[None]:
        """A spinner while the turn runs, on a terminal; it pauses while a reply streams."""
        if not self._turn_on_screen:
            yield
            return
        task = asyncio.create_task(self._spin(), name="console-spinner")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._clear_spinner()

    async def _spin(self) -> None:
        for frame in itertools.cycle(SPINNER):
            if not self._printed and self._turn_on_screen:  # not mid-line, not over a prompt
                self._write(f"{_CLEAR}{frame} working…")
                self._spinning = True
            await asyncio.sleep(SPIN_S)

    def _clear_spinner(self) -> None:
        if self._spinning:
            self._write(_CLEAR)
            self._spinning = False

    def tool_started(self, origin: Origin, tool: str) -> None:
        if self._turn_on_screen and not self._printed:
            self._clear_spinner()
            self._write(f"  · {tool}\n")

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        out = item.outbound
        body = out.text if out.preformatted else _source(out.text)
        if out.attachment is not None:  # a terminal cannot play it: say where it is
            saved = f"[{out.attachment.name} saved at {out.attachment.path}]"
            body = f"{body}\n{saved}" if body.strip() else saved
        end = "" if out.partial else "\n"
        printed = self._printed.pop(edit_platform_id, None) if edit_platform_id is not None else None
        if edit_platform_id is not None and printed is not None and body.startswith(printed):
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
        self._clear_spinner()
        text = visible(text)  # a terminal obeys escape sequences: none reaches it unseen
        if self._prompt is not None and self._prompt.shown:  # a reminder while the person types
            await self._prompt.above(lambda: self._write(text))
        else:
            self._write(text)
        return platform_id

    async def send_line(self, line: str) -> None:
        """Hand one typed line to the gateway as a message from the console owner."""
        assert self.gateway is not None
        await self.gateway.receive(Inbound(surface=self.name, chat_id=CHAT_ID, user_id=self.user_id, text=line))

    async def read_lines(self, settle: Callable[[], Awaitable[None]], stdin: TextIO | None = None) -> None:
        """Read until end of input; each line's replies are printed (`settle`) before the next is read,
        so piped output is in order and, on a TTY, the prompt returns only once the reply is there."""
        stdin = stdin or sys.stdin
        if stdin.isatty() and self.out.isatty():
            from gateway.surfaces.prompt import Prompt  # prompt_toolkit: only for a person at a TTY

            self._prompt = Prompt(self.history)
            lines = self._prompt.lines()
        else:
            lines = _piped_lines(stdin)
        async for line in lines:
            if line.strip():
                await self.send_line(line.rstrip("\n"))
                await settle()


def _source(markdown: str) -> str:
    """`markdown` as the console shows it: its source, with its text unescaped. Parsed only when there is
    something to unescape; otherwise the source is already that, and a chat loads no Markdown parser."""
    if not _UNESCAPES.search(markdown):
        return markdown
    from gateway.surfaces.markdown_source import as_source

    return as_source(markdown)


async def _piped_lines(stdin: TextIO) -> AsyncIterator[str]:
    # readline in a thread: the event loop keeps serving replies and reminders meanwhile.
    while line := await asyncio.to_thread(stdin.readline):
        yield line
