"""The gateway side of Telegram surface tests: a recording implementation of the `GatewayPort` contract
(durable receive with a dedupe key, press returning a text for the presser), a started surface, and
outbox items to deliver."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from gateway.surfaces.telegram import TelegramSurface
from store.records import Button, Inbound, Origin, Outbound, OutboxItem
from tests.support.telegram_api import OWNER_ID, FakeBot

OWNER = Origin(surface="telegram", chat_id=str(OWNER_ID))


class RecordingPort:
    """The GatewayPort contract, recorded. Dedupes by key like the gateway; can hold or fail receive."""

    def __init__(self) -> None:
        self.inbounds: list[Inbound] = []
        self.duplicates: list[str | None] = []
        self.presses: list[tuple[str, str, str, str, Origin]] = []
        self.press_reply = "Approved: it runs now."
        self.hold: asyncio.Event | None = None  # receive waits for it, like a slow store
        self.entered = asyncio.Event()
        self.failures = 0  # receive raises this many times first, like a broken store
        self._seen: set[str | None] = set()
        self._changed = asyncio.Condition()

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("store unavailable")
        async with self._changed:
            duplicate = dedupe_key in self._seen
            (self.duplicates.append(dedupe_key) if duplicate else self.inbounds.append(inbound))
            self._seen.add(dedupe_key)
            self._changed.notify_all()
        return not duplicate

    async def admits(self, surface: str, user_id: str) -> bool:
        return True  # this port records; what access decides is tested against the real Gateway

    async def press(self, surface: str, user_id: str, action: str, value: str, origin: Origin,
                    is_group: bool = False) -> str:
        async with self._changed:
            self.presses.append((surface, user_id, action, value, origin))
            self._changed.notify_all()
        return self.press_reply

    async def wait(self, check: Callable[[], bool], timeout: float = 30.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(check), timeout)


@contextlib.asynccontextmanager
async def running(tg: FakeBot, data_dir: Path, gateway: RecordingPort | None = None,
                  **cfg: object) -> AsyncIterator[tuple[TelegramSurface, RecordingPort]]:
    """A started surface and its port; `cfg` overrides TelegramConfig fields."""
    surface = TelegramSurface(tg.config(**cfg), tg.token, data_dir)
    gateway = gateway or RecordingPort()
    await surface.start(gateway)
    try:
        yield surface, gateway
    finally:
        await surface.stop()


def item(text: str, *, buttons: list[Button] | None = None, origin: Origin = OWNER, item_id: int = 1,
         edit_of: int | None = None, reply_to: str | None = None) -> OutboxItem:
    """An outbox row to deliver."""
    outbound = Outbound(origin=origin, text=text, buttons=buttons or [], edit_of_outbox_id=edit_of,
                        reply_to_platform_id=reply_to)
    return OutboxItem(id=item_id, outbound=outbound, created_at="2026-01-01T00:00:00+00:00")


APPROVAL = [Button(label="Approve", action="approve", value="ap_7f3k"),
            Button(label="Deny", action="deny", value="ap_7f3k")]
