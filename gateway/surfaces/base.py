"""The contract between a surface (one chat platform) and the gateway.

A surface receives platform events, translates them to `Inbound`, and hands them to the gateway with
`GatewayPort.receive`, acknowledging the platform only after that returns (the inbound is then durable).
Button presses go to `GatewayPort.press`. The outbox dispatcher calls `Surface.deliver` for each message
to send or edit. No platform type crosses this boundary.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from store.records import Inbound, Origin, OutboxItem


class DeliveryError(Exception):
    """Delivery failed. `transient` failures are retried (after `retry_after` seconds when the
    platform said so); permanent ones mark the outbox row failed. `in_doubt`: no answer came (a timeout,
    a dropped connection), so the platform may have taken the message all the same; the row keeps its
    in-doubt mark and a surface that can look its messages up does so before posting again."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None,
                 in_doubt: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.in_doubt = in_doubt


@dataclass(frozen=True)
class LiveSettings:
    """How a surface shows a reply while it streams (see gateway/turns/live_reply.py).

    `interval_s` is the least time between two writes of a message (send or edit), inside the platform's
    rate limits; `max_chars` the most Markdown one message holds before the reply continues in a new one;
    the first message goes out once `first_chars` characters (or a sentence) have arrived. With
    `marks_partial` the surface is told which writes are unfinished (`Outbound.partial`) and is written
    to once more at the end even when the text did not change (the console ends its line then); chat
    platforms show "typing…" meanwhile and need no extra edit."""

    interval_s: float
    max_chars: int
    first_chars: int = 20
    marks_partial: bool = False


class GatewayPort(Protocol):
    """What a surface may ask of the gateway."""

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        """Record the inbound durably and queue its turn. Returns False when `dedupe_key` (e.g.
        "telegram:update:123") was seen before: a redelivery, to be acknowledged and ignored."""
        ...

    async def admits(self, surface: str, user_id: str) -> bool:
        """Whether the user may talk to the assistant. Asked before spending anything on a message
        (downloading its attachments): a stranger's files are never fetched."""
        ...

    async def press(self, surface: str, user_id: str, action: str, value: str, origin: Origin,
                    is_group: bool = False) -> str:
        """A button press (action "approve" | "deny" | "clarify") in a chat that is a group or not (a
        group has one session per user). Returns a short text for the presser (a toast / ephemeral
        message): the outcome or why nothing changed."""
        ...


class Surface(abc.ABC):
    """One chat platform."""

    name: str = ""
    has_buttons: bool = False
    max_text: int = 4000
    # Whether start() also begins pulling updates (`pulls`). Residents sharing a store set it False and
    # pull only while they hold the surface's lease (gateway/surfaces/pull_lease.py).
    pull_on_start: bool = True

    @property
    def pulls(self) -> bool:
        """Whether it receives by asking the platform (Telegram getUpdates, Slack Socket Mode), which
        one process at a time may do, rather than being pushed to (a webhook, Slack HTTP)."""
        return False

    async def start_pulling(self) -> None:  # noqa: B027  an optional hook, a no-op by default
        """Begin pulling updates (a surface that `pulls`, after a start without it). Optional: a surface
        that never pulls keeps this no-op."""

    async def stop_pulling(self) -> None:  # noqa: B027  an optional hook, a no-op by default
        """Stop pulling updates; sending still works. Optional: a no-op for a surface that never pulls."""

    @abc.abstractmethod
    async def start(self, gateway: GatewayPort) -> None:
        """Connect and begin receiving. Raise with a clear message if it cannot start."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop receiving and release connections. Must be safe to call after a failed start."""

    @abc.abstractmethod
    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        """Send `item.outbound` (or, with `edit_platform_id`, edit that earlier message to it).
        Returns the platform message id (for receipts and later edits). Raises DeliveryError."""

    def live(self, origin: Origin) -> LiveSettings | None:
        """How to stream replies into `origin`, or None to send each reply whole when it is complete."""
        return None

    def status(self) -> str:
        """One word for `messaging_status`: "up", "down", "starting", "standby" (sending, while another
        resident sharing the store pulls its updates)."""
        return "up"

    @contextlib.asynccontextmanager
    async def progress(self, origin: Origin, platform_message_id: str | None) -> AsyncIterator[None]:
        """Show that a turn is running (typing action, reaction) and always clean it up."""
        yield

    def tool_started(self, origin: Origin, tool: str) -> None:  # noqa: B027  an optional hook, a no-op by default
        """A turn in `origin` has started running `tool`. The terminal prints a progress line; chat
        apps show nothing (their progress sign is `progress`): an optional hook, a no-op here."""
