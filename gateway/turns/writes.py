"""What a turn writes after it opened, grouped into one transaction per step (`Store.write`): each store
call is a round trip to the store's thread (about 0.1 ms), and a step written whole cannot be left half
done by a crash.

A turn opens with one trip (`gateway.turns.opening`). The toolset selection needs the rows that trip
read, so its record (`last_selection`, when it changed) waits for the turn's next write: the model's
message that calls tools (`turn_step`), or the end (`turn_end`: the model's answer, the inbound marked
done and the selection still unwritten, run along the reply's outbox row by `OutboxService.put`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store.inbound import mark_done
from store.messages import add_message
from store.records import MessageRecord
from store.sessions import update_session

Selection = tuple[str, dict[str, Any]]  # a session's id and its new `last_selection`


@dataclass
class Unwritten:
    """What a turn has not written yet, for its next write to carry: the selection record (when it
    changed) and the model's final message (with the reply's row)."""

    selection: Selection | None = None
    messages: list[MessageRecord] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.selection is not None or bool(self.messages)


def _record(db: Any, selection: Selection | None) -> None:
    if selection is not None:
        session_id, chosen = selection
        update_session(db, session_id, {"last_selection": chosen})


def turn_step(message: MessageRecord, selection: Selection | None) -> Callable[[Any], None]:
    """A message of the turn (the model's, calling tools) with the selection record not yet written."""

    def op(db: Any) -> None:
        add_message(db, message)
        _record(db, selection)

    return op


def turn_end(due: Unwritten, queue_id: int | None) -> Callable[[Any], None]:
    """What the turn left unwritten (the stored rows of the model's final message, the selection record)
    and the inbound `queue_id` marked done, written in the transaction of the reply's outbox row."""
    messages, selection = list(due.messages), due.selection

    def along(db: Any) -> None:
        for m in messages:
            add_message(db, m)
        _record(db, selection)
        if queue_id is not None:
            mark_done(db, queue_id)

    return along
