"""The gateway's ToolContext: what one turn's tools may ask of the gateway."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from store.db import Store
from store.records import Attachment, Button, MessageRecord, Origin, Outbound
from toolsets.base import ToolError, Toolset
from toolsets.untrusted import new_boundary, wrap

Enqueue = Callable[[Outbound, str | None], Awaitable[int]]


@dataclass
class TurnContext:
    """Implements `toolsets.base.ToolContext` for one turn (or one approved execution)."""

    store: Store
    user_key: str
    session_id: str
    origin: Origin
    tz: ZoneInfo
    turn_id: str
    services: dict[str, Any]
    enqueue: Enqueue
    available: dict[str, Toolset] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
    guest: bool = False  # a paired guest's turn: only the toolsets shared with guests (gateway.access)
    has_buttons: bool = False  # whether the surface renders buttons (else options are listed in the text)
    ended: bool = False  # set by ask(): the turn stops after this tool round
    boundary: str = field(default_factory=new_boundary)  # closes this turn's untrusted blocks
    external_sources: list[str] = field(default_factory=list)  # what outside content this turn has read
    images: list[dict[str, Any]] = field(default_factory=list)  # to show the model after this tool round
    _sends: int = 0

    def now(self) -> datetime:
        return datetime.now(self.tz)

    def service(self, name: str) -> Any | None:
        return self.services.get(name)

    async def send(self, text: str, origin: Origin | None = None, attachment: Attachment | None = None) -> int:
        target = origin or self.origin
        if target.key() != self.origin.key():
            raise ToolError("messages can only go to the current conversation")
        self._sends += 1
        # Deterministic key: a turn re-run after a crash does not send the same message twice.
        return await self.enqueue(Outbound(origin=target, text=text, attachment=attachment),
                                  f"{self.turn_id}:send:{self._sends}")

    def show_image(self, part: dict[str, Any]) -> None:
        self.images.append(part)

    def images_shown(self, epoch: int) -> MessageRecord | None:
        """The images a tool asked to show (artifact_inspect) since the last call, as the event row that
        follows the tool results (both wire formats accept it there); None when there are none."""
        if not self.images:
            return None
        names = ", ".join(f"{p['name']} (artifact {p['artifact']})" for p in self.images)
        event = MessageRecord(session_id=self.session_id, epoch=epoch, turn_id=self.turn_id, role="event",
                              content=f"The image(s) you asked to see: {names}", user_key=self.user_key,
                              meta={"images": self.images})
        self.images = []
        return event

    async def ask(self, question: str, options: list[str]) -> int:
        self.ended = True
        self._sends += 1
        buttons = [Button(label=o, action="clarify", value=o) for o in options]
        text = question
        if options and not self.has_buttons:  # e.g. the console: the person types the answer
            text += "\n" + "\n".join(f"  {i}. {o}" for i, o in enumerate(options, 1))
        return await self.enqueue(Outbound(origin=self.origin, text=text, buttons=buttons),
                                  f"{self.turn_id}:ask:{self._sends}")

    def load_toolsets(self, names: list[str]) -> list[str]:
        unknown = [n for n in names if n not in self.available]
        if unknown:
            raise ToolError(f"unknown or unavailable toolsets: {', '.join(unknown)}; "
                            f"available: {', '.join(self.available)}")
        self.loaded.update(names)
        return sorted(self.loaded)

    def external(self, source: str, content: str) -> str:
        if source not in self.external_sources:
            self.external_sources.append(source)
        return wrap(source, content, self.boundary)
