"""What a turn writes, grouped into one transaction per step (`Store.write`): each store call is a round
trip to the store's thread (about 0.1 ms), and a step written whole cannot be left half done by a crash.

A turn starts with its new message and the session's selection, reading the user's memory for the
prompt alongside (`turn_start`), and ends with the
model's answer, the reply's outbox row and the inbound marked done (`turn_end`, run along the row by
`OutboxService.put`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.inbound import mark_done
from store.memory import list_memory
from store.messages import add_message
from store.records import MemoryEntry, MessageRecord
from store.sessions import update_session


def turn_start(new: MessageRecord | None, session_id: str, selection: dict[str, Any] | None,
               memory_of: str | None = None) -> Callable[[Any], list[MemoryEntry] | None] | None:
    """The turn's new message (None on a re-run) and its selection (None when unchanged), as one
    transaction; with `memory_of`, that user's memory entries are read in it too (returned; else None).
    None when there is nothing to write or read."""
    if new is None and selection is None and memory_of is None:
        return None

    def op(db: Any) -> list[MemoryEntry] | None:
        if new is not None:
            add_message(db, new)
        if selection is not None:
            update_session(db, session_id, {"last_selection": selection})
        return list_memory(db, memory_of) if memory_of is not None else None

    return op


def turn_end(answer: list[MessageRecord], queue_id: int | None) -> Callable[[Any], None]:
    """The answer (stored rows of the model's final message) and the inbound `queue_id` marked done,
    written in the transaction of the reply's outbox row."""

    def along(db: Any) -> None:
        for m in answer:
            add_message(db, m)
        if queue_id is not None:
            mark_done(db, queue_id)

    return along
