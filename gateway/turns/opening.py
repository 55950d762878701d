"""A turn opens with one store round trip: the session got (or created), what its history window needs
read, the turn's message written and the user's memory read, in one transaction (`Store.write`).

The op on the store's thread (`turn_open`) only reads and writes the database and returns plain data;
the window cache belongs to the event loop, which takes the session's window out before the trip and
settles it with what was read after (`open_turn`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.turns.history import Since, WindowRead, read_window
from gateway.turns.window_cache import HistoryWindows
from store.memory import list_memory
from store.messages import Messages, add_message
from store.records import MemoryEntry, MessageRecord, Origin, SessionRecord
from store.sessions import get_or_create_session


@dataclass(frozen=True)
class SessionKey:
    """A chat session to get, or create for `user_key`, in the trip that opens its turn."""

    id: str
    origin: Origin
    user_key: str


@dataclass(frozen=True)
class Opening:
    """What opens a turn: its message (a user's text, or an event such as an approval's outcome), and
    whether the prompt wants the user's memory."""

    turn_id: str
    role: Literal["user", "event"]
    content: str
    meta: dict[str, Any]
    with_memory: bool

    @classmethod
    def of(cls, turn_id: str, user_text: str | None, event: str | None, images: list[dict[str, Any]] | None,
           tainted_by: Sequence[str], with_memory: bool) -> Opening:
        """The user's text (with its images), else the event; `tainted_by`: outside content it carries."""
        meta = {**({"images": images} if images else {}), **({"external": list(tainted_by)} if tainted_by else {})}
        if user_text is not None:
            return cls(turn_id, "user", user_text, meta, with_memory)
        return cls(turn_id, "event", event or "", meta, with_memory)


@dataclass(frozen=True)
class Opened:
    """What the opening trip read and wrote: the session, the window's read, the turn's message (None on a
    re-run that found rows of the turn: it continues them) and the user's memory (None when not asked)."""

    session: SessionRecord
    window: WindowRead
    new: MessageRecord | None
    memory: list[MemoryEntry] | None


def turn_open(session: SessionRecord | SessionKey, opening: Opening, since: Since | None, held: bool,
              budget_chars: int, max_messages: int) -> Callable[[Any], Opened]:
    """The op of the trip: `session` (a key: got or created), its window read after the cached one
    (`since`, which `held` rows of the turn already) or whole, the turn's message with the session's epoch
    unless the turn has rows already, and the memory."""

    def op(db: Any) -> Opened:
        record = session if isinstance(session, SessionRecord) else \
            get_or_create_session(db, session.id, session.origin, session.user_key)
        window = read_window(db, record.id, record.epoch, since, budget_chars, max_messages)
        turn_id = opening.turn_id
        new = None
        if not ((held and not window.whole) or any(m.turn_id == turn_id for m in window.rows)):
            new = MessageRecord(session_id=record.id, epoch=record.epoch, turn_id=turn_id, role=opening.role,
                                content=opening.content, user_key=record.user_key, meta=opening.meta)
            add_message(db, new)
        memory = list_memory(db, record.user_key) if opening.with_memory else None
        return Opened(record, window, new, memory)

    return op


async def open_turn(messages: Messages, windows: HistoryWindows, session: SessionRecord | SessionKey,
                    opening: Opening) -> tuple[Opened, list[MessageRecord]]:
    """Open the turn in one trip; returns what it read and wrote, and the session's window rows, oldest first
    (settled in the cache; a copy the caller owns)."""
    taken = windows.take(session.id)
    since = taken.since if taken is not None else None
    held = taken is not None and taken.holds(opening.turn_id)
    opened = await messages.store.write(turn_open(session, opening, since, held, windows.budget,
                                                   windows.max_messages))
    messages.wrote(opened.new is not None)
    return opened, windows.settle(opened.session.id, taken, opened.window)
