"""The bounded context: the session's latest summary, then the most recent whole turns that fit the
budget, in characters and in messages.

Turns are dropped whole from the oldest end, so a tool call is never separated from its result and a
session that lasts months costs the same per request as a new one. What falls out is summarised by
`gateway.turns.compaction` into a summary row; the window starts after the turns that summary covers.
Everything stays in the store. Stored rows become chat messages here (`to_chat`); the windows kept in
memory from turn to turn are `gateway.turns.window_cache`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.llm.types import ChatMessage, ImagePart, stored_fields
from store.messages import messages_after, messages_within, newest_summary
from store.records import MessageRecord
from store.tables import Database

# What one image counts against the context budget, in characters (about its token cost in a vision
# model). Images are fitted after the text, so when the budget is tight they are dropped first.
IMAGE_CHARS = 4_000


def to_chat(msg: MessageRecord) -> ChatMessage:
    """One stored message as the model sees it. Events (approval outcomes, late notices) are shown as
    bracketed user-side notes, which every provider accepts after a tool result."""
    if msg.role == "event":
        return ChatMessage(role="user", content=f"[event] {msg.content}", images=_images(msg))
    if msg.role == "summary":
        return ChatMessage(role="user", content=f"[summary of the earlier conversation, for context] {msg.content}")
    if msg.role == "tool":
        return ChatMessage(role="tool", content=msg.content, tool_call_id=msg.tool_call_id, name=msg.tool_name)
    if msg.role == "assistant":
        return ChatMessage(role="assistant", content=msg.content, tool_calls=msg.tool_calls, **stored_fields(msg.meta))
    return ChatMessage(role="user", content=msg.content, images=_images(msg))


def _images(msg: MessageRecord) -> list[ImagePart]:
    """Images a user message or an event carried (stored downscaled in its meta by gateway.services.media)."""
    return [ImagePart(mime_type=i["mime_type"], data=i["data"]) for i in msg.meta.get("images", ())]


def row_chars(msg: MessageRecord) -> int:
    """What a row counts against the character budget."""
    return len(msg.content) + sum(len(c.arguments) + len(c.name) for c in msg.tool_calls) + 20


def newest_turns(messages: list[MessageRecord], budget_chars: int,
                 size: Callable[[MessageRecord], int] = row_chars,
                 max_messages: int | None = None) -> list[MessageRecord]:
    """The newest whole turns whose total size fits `budget_chars` and whose rows number at most
    `max_messages` (the newest turn is always kept, even when it alone is larger). A turn is a run of
    consecutive messages with one turn id."""
    used, start = 0, len(messages)
    limit = len(messages) if max_messages is None else max_messages
    while start > 0:
        turn_id, first, turn_size = messages[start - 1].turn_id, start, 0
        while first > 0 and messages[first - 1].turn_id == turn_id:
            first -= 1
            turn_size += size(messages[first])
        if start < len(messages) and (used + turn_size > budget_chars or len(messages) - first > limit):
            break
        used, start = used + turn_size, first
    return messages[start:]


def fit_history(messages: list[MessageRecord], budget_chars: int,
                convert: Callable[[MessageRecord], ChatMessage] = to_chat,
                size: Callable[[MessageRecord], int] = row_chars, max_messages: int | None = None) -> list[ChatMessage]:
    """The model's view of `messages`: the newest whole turns that fit, as chat messages, with as many of
    their images as fit in what the text left of the budget."""
    rows = newest_turns(messages, budget_chars, size, max_messages)
    room = budget_chars - sum(size(m) for m in rows)
    return drop_orphans(fit_images([convert(m) for m in rows], room))


def fit_images(msgs: list[ChatMessage], room: int) -> list[ChatMessage]:
    """Keep images newest first while they fit in `room` (the newest ones always); older ones are
    replaced by a note, so the model knows an image was there and can look again."""
    out: list[ChatMessage] = []
    newest = True
    for m in reversed(msgs):
        if m.images:
            cost = IMAGE_CHARS * len(m.images)
            if newest or cost <= room:
                room -= cost
            else:
                note = f"[{len(m.images)} image(s) left out of the context; artifact_inspect shows one again]"
                m = m.model_copy(update={"images": [], "content": f"{m.content}\n{note}" if m.content else note})
            newest = False
        out.append(m)
    out.reverse()
    return out


def external_sources(rows: list[MessageRecord], summary: MessageRecord | None = None) -> list[str]:
    """The outside content the model still sees in this context: the sources recorded on the rows
    (tool results that read it, events that carry it) and on the summary that took in older ones.

    A turn whose context holds outside content is tainted even when it read nothing itself: an email
    read an hour ago is still in the window, and so is any instruction planted in it."""
    sources: list[str] = []
    for m in ([summary] if summary is not None else []) + rows:
        if external := m.meta.get("external"):  # few rows have any: skip the rest cheaply (every turn)
            sources += [s for s in external if s not in sources]
    return sources


def covered_to(summary: MessageRecord | None) -> int:
    """The id of the last message a summary row covers (0 without a summary)."""
    return int(summary.meta.get("covers_to_id", 0)) if summary is not None else 0


def window_budget(budget_chars: int, summary: MessageRecord | None) -> int:
    """What the rows of a window starting with `summary` may take of the budget."""
    return max(0, budget_chars - (row_chars(summary) if summary is not None else 0))


@dataclass(frozen=True)
class Since:
    """Where a cached window ends: its epoch and its last row's id."""

    epoch: int
    last_id: int


@dataclass(frozen=True)
class WindowRead:
    """What the store gave a window (`read_window`): the rows after the cached window's last, or (`whole`)
    the window whole, starting with `summary`."""

    epoch: int
    rows: list[MessageRecord]
    whole: bool
    summary: MessageRecord | None = None


def read_window(db: Database, session_id: str, epoch: int, since: Since | None, budget_chars: int,
                max_messages: int) -> WindowRead:
    """On the store's thread: the rows written after the cached window (`since`) when it is of `epoch`;
    else, or when a new summary arrived (compaction ran: the window must start after what it covers), the
    window whole: the latest summary, then the newest whole turns after it that fit (one turn past the
    budget when there is more, so a cut says unsummarised rows were left out)."""
    if since is not None and since.epoch == epoch:
        new = messages_after(db, session_id, epoch, since.last_id)
        if not any(m.role == "summary" for m in new):
            return WindowRead(epoch, new, whole=False)
    summary = newest_summary(db, session_id, epoch)
    rows = messages_within(db, session_id, epoch, window_budget(budget_chars, summary), covered_to(summary),
                           max_messages)
    return WindowRead(epoch, rows, whole=True, summary=summary)


UNKNOWN_OUTCOME = ("Outcome unknown: the process stopped while this ran. It was not run again; check whether "
                   "it happened (for example with task_list, or by asking the owner) before calling it again.")


def drop_orphans(msgs: list[ChatMessage]) -> list[ChatMessage]:
    """Keep every provider's wire format valid around a turn cut by a crash or by the budget: a tool
    result whose call is not in view is dropped; a call with no stored result is kept, paired with an
    "outcome unknown" result (dropping it would show the model no trace of it, and it would call it
    again)."""
    called = {c.id for m in msgs for c in m.tool_calls}
    answered = {m.tool_call_id for m in msgs if m.role == "tool"}
    out: list[ChatMessage] = []
    owed: list[ChatMessage] = []  # synthetic results for the last assistant message's unanswered calls
    for m in msgs:
        if m.role == "tool":
            if m.tool_call_id in called:
                out.append(m)
            continue
        if owed:
            out += owed
            owed = []
        out.append(m)
        if m.tool_calls:  # most messages call nothing: no list to build for them (every turn, every row)
            owed = [ChatMessage(role="tool", content=UNKNOWN_OUTCOME, tool_call_id=c.id, name=c.name)
                    for c in m.tool_calls if c.id not in answered]
    return out + owed
