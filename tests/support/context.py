"""A ToolContext for testing toolsets without a running gateway (the seam DESIGN.md describes).

It records what a tool asked of the gateway (messages sent, questions asked) so tests can assert it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from store.db import Store
from store.records import Attachment, Origin
from toolsets.untrusted import new_boundary, wrap


@dataclass
class RecordingContext:
    store: Store
    user_key: str = "console:owner"
    session_id: str = "console:test"
    origin: Origin = field(default_factory=lambda: Origin(surface="console", chat_id="test"))
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    turn_id: str = "turn-1"
    services: dict[str, Any] = field(default_factory=dict)
    sent: list[tuple[str, Origin]] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)  # attachments of the messages sent
    images: list[dict[str, Any]] = field(default_factory=list)  # shown to the model
    asked: list[tuple[str, list[str]]] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    boundary: str = field(default_factory=new_boundary)
    external_sources: list[str] = field(default_factory=list)

    def now(self) -> datetime:
        return datetime.now(self.tz)

    def service(self, name: str) -> Any | None:
        return self.services.get(name)

    async def send(self, text: str, origin: Origin | None = None, attachment: Attachment | None = None) -> int:
        self.sent.append((text, origin or self.origin))
        if attachment is not None:
            self.files.append(attachment)
        return len(self.sent)

    def show_image(self, part: dict[str, Any]) -> None:
        self.images.append(part)

    async def ask(self, question: str, options: list[str]) -> int:
        self.asked.append((question, options))
        return len(self.asked)

    def load_toolsets(self, names: list[str]) -> list[str]:
        self.loaded.extend(names)
        return list(self.loaded)

    def external(self, source: str, content: str) -> str:
        self.external_sources.append(source)
        return wrap(source, content, self.boundary)

    def unwrap(self, text: str) -> str:
        """The content of the one untrusted block `text` ends with (fails when there is none)."""
        opening = text.index(f'boundary="{self.boundary}">\n') + len(f'boundary="{self.boundary}">\n')
        closing = f'\n</untrusted boundary="{self.boundary}">'
        assert text.endswith(closing), text
        return text[opening:-len(closing)]
