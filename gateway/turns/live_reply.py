"""A reply that appears while the model writes it: the runtime's surface-neutral handle on streaming.

The runtime hands each piece of text to `LiveReply.add` and ends with `finish`. The reply is outbox rows
under the turn's reply key (`<turn>:reply`, then `<turn>:reply:2`, ... when it outgrows one message),
rewritten with `OutboxService.put`: the first write sends the message, later ones edit it. Writes are
throttled to the surface's `LiveSettings.interval_s`, so however fast the model streams, a message is
written at most once per interval; a write that finds the text unchanged is skipped. Because the rows are
durable and keyed by the turn, a turn re-run after a crash writes the same rows and so edits the message
already on the screen to its final text, never sending a second copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway.llm.types import Restart
from gateway.outbox import OutboxService
from gateway.surfaces.base import LiveSettings
from gateway.surfaces.text import split_text
from store.records import Origin, Outbound

log = logging.getLogger(__name__)

_SENTENCE_END = re.compile(r"[.!?。！？:\n]\s")
# The first message waits this long after the first piece, so a short reply that streams in quickly is
# sent once, whole, instead of as a fragment and an edit a moment later.
FIRST_WAIT_S = 0.1
# What a message of the reply says once the reply no longer reaches it (see `_write`).
WITHDRAWN = "(withdrawn: the reply is the message above)"


class LiveReply:
    """One streamed reply into one chat."""

    def __init__(self, outbox: OutboxService, origin: Origin, dedupe: str, settings: LiveSettings) -> None:
        self.outbox = outbox
        self.origin = origin
        self.dedupe = dedupe
        self.settings = settings
        self.text = ""  # the current model call's text so far
        self.prefix = ""  # shown before the text (what a voice note said)
        self._row: int | None = None  # the outbox row of the last part written
        self._shown = False  # the first message was written (enough text arrived)
        self._final: str | None = None
        self._written: list[tuple[str, bool]] = []  # per part: (text, partial) as last written
        self._last_write = float("-inf")
        self._dirty = asyncio.Event()
        self._urgent = asyncio.Event()  # cuts the first wait short: the reply is complete before it ended
        self._writer: asyncio.Task[None] | None = None
        self._along: Callable[[Any], None] | None = None  # written with the final write's last row
        self.carried = False  # `finish`'s `along` was written with a row

    @property
    def started(self) -> bool:
        """Some of the reply is (or is being) shown."""
        return self._shown

    async def add(self, piece: str) -> None:
        """Take the next piece of the reply (a `TextSink`). Never waits for the platform. A `Restart`
        replaces the text so far (it was the model's reasoning): the message is edited to what follows."""
        if not self.text and self._last_write == float("-inf"):
            self._last_write = asyncio.get_running_loop().time() - self.settings.interval_s + FIRST_WAIT_S
        if isinstance(piece, Restart):
            self.text = ""
        self.text += piece
        if not self._shown:
            stripped = self.text.strip()
            if len(stripped) < self.settings.first_chars and not _SENTENCE_END.search(self.text):
                return
            self._shown = True
        self._dirty.set()
        self._ensure_writer()

    def new_call(self) -> None:
        """The model is called again (after tool calls): its text replaces what this one wrote, as the
        final reply of a turn is the last call's text."""
        self.text = ""

    async def finish(self, text: str | None, along: Callable[[Any], None] | None = None) -> int | None:
        """End the reply with `text` (formatted, not marked unfinished); returns the outbox row of its
        last part (None if nothing was written). With None (the turn ended by asking a question) the
        text shown so far stays, marked finished. Waits for the throttle, so the final write also
        respects the interval. `along(db)` goes in the transaction of the final write's last row
        (`OutboxService.put`), and `carried` says whether it did: a final write that changes nothing
        carries nothing, and the caller writes it on its own."""
        self._along = along
        if text is None:
            if not self._written or not self.text.strip():
                return self._row  # what is on the screen stays as it is
            text = self.text
        if not self._written:  # nothing on the screen yet: no reason to wait
            self._last_write = float("-inf")
            self._urgent.set()
        self._final = text
        self._dirty.set()
        self._ensure_writer()
        assert self._writer is not None
        await self._writer
        return self._row

    def abandon(self) -> None:
        """The turn failed: stop writing (the message keeps what it shows; the failure is reported apart)."""
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()

    def _ensure_writer(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name=f"live-reply:{self.dedupe}")

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._dirty.wait()
            wait = self._last_write + self.settings.interval_s - loop.time()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):  # wait_for would make a task each time
                        await self._urgent.wait()
            self._dirty.clear()
            final = self._final
            if await self._write(self.prefix + (final if final is not None else self.text), partial=final is None):
                self._last_write = loop.time()
            if final is not None:
                return

    async def _write(self, text: str, *, partial: bool) -> bool:
        """Write the parts that changed; True if anything was written. The final write's last row
        carries `finish`'s `along`, so it is recorded only once the whole reply is."""
        if not text.strip():
            return False
        parts = split_text(text, self.settings.max_chars)
        states = [(part, partial and index == len(parts) - 1 and self.settings.marks_partial)
                  for index, part in enumerate(parts)]
        # Messages the text no longer reaches (it was replaced: a refusal, reasoning) must not keep showing
        # it; a message cannot be taken back, so each says it was withdrawn. Written first, so the row
        # that carries `along` and is returned is the reply's own last part.
        states += [(WITHDRAWN, False)] * (len(self._written) - len(parts))
        changed = [i for i, state in enumerate(states) if i >= len(self._written) or self._written[i] != state]
        changed.sort(key=lambda i: i < len(parts))
        for index in changed:
            state = states[index]
            key = self.dedupe if index == 0 else f"{self.dedupe}:{index + 1}"
            along = self._along if not partial and index == changed[-1] else None
            self._row = await self.outbox.put(Outbound(origin=self.origin, text=state[0], partial=state[1]), key, along)
            self.carried = self.carried or along is not None
            if index < len(self._written):
                self._written[index] = state
            else:
                self._written.append(state)
        if changed:
            log.debug("live_reply_write key=%s parts=%d partial=%s chars=%d", self.dedupe, len(parts), partial,
                      len(text))
        return bool(changed)


@contextlib.asynccontextmanager
async def abandoned_on_error(live: LiveReply | None) -> AsyncIterator[None]:
    """A turn that fails stops its live reply's writing (the failure is reported on its own)."""
    try:
        yield
    except BaseException:
        if live is not None:
            live.abandon()
        raise


def live_reply(outbox: OutboxService, origin: Origin, dedupe: str, stream: bool) -> LiveReply | None:
    """A live reply when streaming is on (`stream`: `[runtime] stream` with a model) and the surface can show
    one in this chat."""
    if not stream:
        return None
    surface = outbox.surfaces.get(origin.surface)
    settings = surface.live(origin) if surface is not None else None
    return LiveReply(outbox, origin, dedupe, settings) if settings is not None else None
