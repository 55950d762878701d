"""A recording GatewayPort for the Slack surface's tests (tests/test_slack.py): the surface's side of the
contract, without a Gateway."""

from __future__ import annotations

import asyncio
from typing import Any

from store.records import Inbound, Origin
from tests.support.slack_events import OWNER

REFUSAL = "Only the owner can decide this."


class RecordingPort:
    """The GatewayPort contract, recorded: receive dedupes by key as the gateway does, press answers
    the owner with the outcome and anyone else with a refusal. `hold()` makes receive wait."""

    def __init__(self) -> None:
        self.accepted: list[Inbound] = []
        self.keys: list[str | None] = []
        self.presses: list[tuple[str, str, str, str, Origin]] = []
        self._changed = asyncio.Condition()
        self._gate: asyncio.Event | None = None
        self.on_receive: list[Any] = []

    def hold(self) -> asyncio.Event:
        self._gate = asyncio.Event()
        return self._gate

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        for hook in self.on_receive:
            hook(inbound)
        if self._gate is not None:
            gate, self._gate = self._gate, None
            await gate.wait()
        async with self._changed:
            self.keys.append(dedupe_key)
            fresh = dedupe_key is None or self.keys.count(dedupe_key) == 1
            if fresh:
                self.accepted.append(inbound)
            self._changed.notify_all()
        return fresh

    async def admits(self, surface: str, user_id: str) -> bool:
        return True  # this port records; what access decides is tested against the real Gateway

    async def press(self, surface: str, user_id: str, action: str, value: str, origin: Origin,
                    is_group: bool = False) -> str:
        async with self._changed:
            self.presses.append((surface, user_id, action, value, origin))
            self._changed.notify_all()
        return "Approved." if user_id == OWNER else REFUSAL

    async def wait(self, what: str, count: int = 1) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(getattr(self, what)) >= count), 5)
