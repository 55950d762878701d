"""A follow-up turn (an approval's outcome, a helper's report) once a budget cap is used up: no model call.

The event is kept in the session as the follow-up would have kept it (outside content it carries still
taints what comes after), so the next turn sees it; the chat is told in words what happened and why the
model stays silent (`gateway.services.budget.follow_up_refusal`).
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.services.budget import Roles, follow_up_refusal
from gateway.turns.opening import Opening
from store.messages import Messages
from store.records import MessageRecord, Origin, SessionRecord


class Turns(Protocol):
    """What is needed of the runtime (which imports this module)."""

    services: dict[str, Any]

    @property
    def access(self) -> Roles: ...

    @property
    def messages(self) -> Messages: ...

    async def reply(self, origin: Origin, text: str, dedupe: str) -> int: ...


async def stopped_for_budget(turns: Turns, session: SessionRecord, event: str, dedupe: str,
                             tainted_by: list[str]) -> bool:
    """True when a cap is used up: the event is stored and the chat told, and no follow-up turn runs."""
    notice = await follow_up_refusal(turns.services.get("budget"), turns.access, session.user_key, event)
    if notice is None:
        return False
    opening = Opening.of(dedupe, None, event, None, tainted_by, with_memory=False)
    await turns.messages.add(MessageRecord(session_id=session.id, epoch=session.epoch, turn_id=dedupe,
                                           role=opening.role, content=opening.content, user_key=session.user_key,
                                           meta=opening.meta))
    await turns.reply(session.origin, notice, f"{dedupe}:budget")
    return True
