"""The bounded context: the session's latest summary, then the most recent whole turns that fit the
character budget.

Turns are dropped whole from the oldest end, so a tool call is never separated from its result and a
session that lasts months costs the same per request as a new one. What falls out is summarised by
`gateway.turns.compaction` into a summary row; the window starts after the turns that summary covers.
Everything stays in the store.
"""

from __future__ import annotations

import operator
import sys
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gateway.llm.types import ChatMessage, ImagePart, stored_fields
from store.messages import Messages, messages_after, messages_within, newest_summary
from store.records import MessageRecord
from store.tables import Database

T = TypeVar("T")

# What one image counts against the context budget, in characters (about its token cost in a vision
# model). Images are fitted after the text, so when the budget is tight they are dropped first.
IMAGE_CHARS = 4_000
# The cache of windows is bounded in bytes: a few MB for every session together, least recently used
# evicted first (an evicted session is read again from the store on its next turn).
CACHE_BYTES = 6_000_000  # about 20 full windows of the default 48,000-character budget
# What a cached row costs besides its content: the record and its converted chat message with their
# small strings, lists and dicts (measured with tracemalloc, tests/test_history_cache.py).
ROW_BYTES = 2_400


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


def _size(msg: MessageRecord) -> int:
    return len(msg.content) + sum(len(c.arguments) + len(c.name) for c in msg.tool_calls) + 20


def _bytes(msg: MessageRecord) -> int:
    """About what a cached row holds in memory: its strings (images included) and the objects around them."""
    images = sum(sys.getsizeof(i.get("data", "")) for i in msg.meta.get("images", ()))
    calls = sum(sys.getsizeof(c.arguments) for c in msg.tool_calls)
    return ROW_BYTES + sys.getsizeof(msg.content) + calls + images


def newest_turns(messages: list[MessageRecord], budget_chars: int,
                 size: Callable[[MessageRecord], int] = _size) -> list[MessageRecord]:
    """The newest whole turns whose total size fits `budget_chars` (the newest turn is always kept,
    even when it alone is larger). A turn is a run of consecutive messages with one turn id."""
    used, start = 0, len(messages)
    while start > 0:
        turn_id, first, turn_size = messages[start - 1].turn_id, start, 0
        while first > 0 and messages[first - 1].turn_id == turn_id:
            first -= 1
            turn_size += size(messages[first])
        if start < len(messages) and used + turn_size > budget_chars:
            break
        used, start = used + turn_size, first
    return messages[start:]


def fit_history(messages: list[MessageRecord], budget_chars: int,
                convert: Callable[[MessageRecord], ChatMessage] = to_chat,
                size: Callable[[MessageRecord], int] = _size) -> list[ChatMessage]:
    """The model's view of `messages`: the newest whole turns that fit, as chat messages, with as many of
    their images as fit in what the text left of the budget."""
    rows = newest_turns(messages, budget_chars, size)
    room = budget_chars - sum(size(m) for m in rows)
    return _drop_orphans(_fit_images([convert(m) for m in rows], room))


def _fit_images(msgs: list[ChatMessage], room: int) -> list[ChatMessage]:
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
    return max(0, budget_chars - (_size(summary) if summary is not None else 0))


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


def read_window(db: Database, session_id: str, epoch: int, since: Since | None, budget_chars: int) -> WindowRead:
    """On the store's thread: the rows written after the cached window (`since`) when it is of `epoch`;
    else, or when a new summary arrived (compaction ran: the window must start after what it covers), the
    window whole: the latest summary, then the newest whole turns after it that fit (one turn past the
    budget when there is more, so a cut says unsummarised rows were left out)."""
    if since is not None and since.epoch == epoch:
        new = messages_after(db, session_id, epoch, since.last_id)
        if not any(m.role == "summary" for m in new):
            return WindowRead(epoch, new, whole=False)
    summary = newest_summary(db, session_id, epoch)
    rows = messages_within(db, session_id, epoch, window_budget(budget_chars, summary), covered_to(summary))
    return WindowRead(epoch, rows, whole=True, summary=summary)


@dataclass
class Window:
    """One session's cached rows and what they cost, kept as running totals so a turn pays for its new
    rows rather than for the whole window: characters against the budget, bytes against the cache's bound."""

    epoch: int
    summary: MessageRecord | None = None
    rows: list[MessageRecord] = field(default_factory=list)
    last_id: int = 0
    dropped: bool = False  # unsummarised rows older than the window exist (compaction has work)
    chars: int = 0  # of the rows
    nbytes: int = 0  # of the rows and the summary
    chats: dict[int, ChatMessage] = field(default_factory=dict)  # stored rows already converted
    sizes: dict[int, int] = field(default_factory=dict)  # and already measured
    # Kept along with the rows so a turn does not walk the whole window again: the rows as chat
    # messages, the rows that carry outside content, how many carry images, and the tool call ids
    # called and answered (with both sets equal, no row is an orphan: the view is the chat messages).
    chat_rows: list[ChatMessage] = field(default_factory=list)
    external_rows: list[MessageRecord] = field(default_factory=list)
    images: int = 0
    called: Counter[str] = field(default_factory=Counter)
    answered: Counter[str | None] = field(default_factory=Counter)

    @property
    def since(self) -> Since:
        return Since(self.epoch, self.last_id)

    def holds(self, turn_id: str) -> bool:
        """Whether rows of the turn are in the window."""
        return any(m.turn_id == turn_id for m in self.rows)

    def size(self, msg: MessageRecord) -> int:
        return _once(self.sizes, msg, _size)

    def chat(self, msg: MessageRecord) -> ChatMessage:
        return _once(self.chats, msg, to_chat)

    def extend(self, new: list[MessageRecord], budget: int) -> None:
        """Add rows newer than the window's, then drop whole turns from the oldest end while it is over
        `budget` (the newest turn stays, even alone over it): what `newest_turns` keeps."""
        for m in new:
            self.rows.append(m)
            self.chat_rows.append(self.chat(m))
            self._count(m, 1)
            self.chars += self.size(m)
            self.nbytes += _bytes(m)
            self.last_id = max(self.last_id, m.id or 0)
        cut = 0
        while self.chars > budget:
            end = cut
            while end < len(self.rows) and self.rows[end].turn_id == self.rows[cut].turn_id:
                end += 1
            if end == len(self.rows):
                break
            for m in self.rows[cut:end]:
                self._count(m, -1)
                self.chars -= self.size(m)
                self.nbytes -= _bytes(m)
                self.sizes.pop(m.id or 0, None)
                self.chats.pop(m.id or 0, None)
            cut = end
        if cut:
            gone = {id(m) for m in self.rows[:cut]}
            self.rows = self.rows[cut:]
            self.chat_rows = self.chat_rows[cut:]
            self.external_rows = [m for m in self.external_rows if id(m) not in gone]
            self.dropped = True

    def _count(self, m: MessageRecord, sign: int) -> None:
        """Add (sign 1) or take away (-1) what `m` brings to the running counts."""
        if m.meta.get("external") and sign > 0:  # taken away with the rows cut, in `extend`
            self.external_rows.append(m)
        if m.meta.get("images"):
            self.images += sign
        if m.role == "assistant":  # as to_chat has it: only an assistant message carries calls
            for c in m.tool_calls:
                self.called[c.id] += sign
        if m.role == "tool":  # a result without a call id (None) is never answered: never plain
            self.answered[m.tool_call_id] += sign

    def plain(self) -> bool:
        """Whether the rows' view is their chat messages as they are: no images to fit, no orphans."""
        return not self.images and +self.called == +self.answered


def _extends(rows: list[MessageRecord], window: list[MessageRecord]) -> bool:
    """Whether `rows` are the `window` rows themselves, then maybe more."""
    return len(rows) >= len(window) and all(map(operator.is_, rows, window))


def _plain(m: MessageRecord) -> bool:
    """A row that adds no images, calls and results to a view (a new message, an event)."""
    return m.role not in ("tool", "assistant") and not m.meta.get("images")


def _once(cache: dict[int, T], msg: MessageRecord, compute: Callable[[MessageRecord], T]) -> T:
    """`compute(msg)`, remembered by row id for stored rows (rows of the running turn have no id yet)."""
    if msg.id is None:
        return compute(msg)
    value = cache.get(msg.id)
    if value is None:
        value = cache[msg.id] = compute(msg)
    return value


class HistoryWindows:
    """Each active session's recent messages, kept in memory and topped up from the store.

    The store stays the source of truth: every load asks it for rows newer than the last one seen
    (which also picks up rows other processes wrote, e.g. a follow-up after a CLI approval), so a turn
    parses a handful of new rows instead of the whole window. Each window is bounded in characters (the
    context budget), all of them together in bytes (`max_bytes`, least recently used evicted first).
    """

    def __init__(self, messages: Messages, budget_chars: int, max_bytes: int = CACHE_BYTES) -> None:
        self.messages = messages
        self.budget = budget_chars
        self.max_bytes = max_bytes
        self._windows: OrderedDict[str, Window] = OrderedDict()
        self._bytes = 0  # of every cached window

    @property
    def cached_bytes(self) -> int:
        """What the cached windows hold, by the estimate the bound is enforced on."""
        return self._bytes

    def cached(self, session_id: str) -> bool:
        return session_id in self._windows

    async def load(self, session_id: str, epoch: int) -> list[MessageRecord]:
        """The session's newest whole turns within the budget, oldest first (a copy the caller owns)."""
        taken = self.take(session_id)
        since = taken.since if taken is not None else None
        read = await self.messages.store.read(lambda db: read_window(db, session_id, epoch, since, self.budget))
        return self.settle(session_id, taken, read)

    def take(self, session_id: str) -> Window | None:
        """The session's cached window, out of the cache until `settle` puts it back: while the store reads
        what came after it, no other load tops it up and no eviction drops it."""
        window = self._windows.pop(session_id, None)
        if window is not None:
            self._bytes -= window.nbytes
        return window

    def settle(self, session_id: str, taken: Window | None, read: WindowRead) -> list[MessageRecord]:
        """The session's window back in the cache: `taken` (from `take`) with the rows `read` after it, or
        the window `read` whole. Returns its rows, oldest first (a copy the caller owns)."""
        if read.whole or taken is None:
            window = Window(read.epoch, read.summary, last_id=(read.summary.id or 0) if read.summary else 0,
                            nbytes=_bytes(read.summary) if read.summary else 0)
        else:
            window = taken
        window.extend(read.rows, window_budget(self.budget, window.summary))
        if (replaced := self._windows.pop(session_id, None)) is not None:  # two loads of one session at once
            self._bytes -= replaced.nbytes
        self._windows[session_id] = window
        self._bytes += window.nbytes
        while self._bytes > self.max_bytes and len(self._windows) > 1:
            _, evicted = self._windows.popitem(last=False)
            self._bytes -= evicted.nbytes
        return list(window.rows)

    def view(self, session_id: str, rows: list[MessageRecord]) -> list[ChatMessage]:
        """The latest summary, then `fit_history` of `rows`, converting each stored row once per window
        rather than per turn."""
        window = self._windows.get(session_id)
        if window is None:
            return fit_history(rows, self.budget)
        head = [window.chat(window.summary)] if window.summary is not None else []
        budget = window_budget(self.budget, window.summary)
        n = len(window.rows)
        if _extends(rows, window.rows):  # the window, then this turn's rows
            tail = rows[n:]
            used = window.chars + sum(window.size(m) for m in tail)
            if used <= budget:  # the usual case: all of it fits, nothing to measure again
                if window.plain() and all(_plain(m) for m in tail):  # and nothing to drop or fit either
                    return head + window.chat_rows + [window.chat(m) for m in tail]
                return head + _drop_orphans(_fit_images([window.chat(m) for m in rows], budget - used))
        return head + fit_history(rows, budget, window.chat, window.size)

    def external_sources(self, session_id: str, rows: list[MessageRecord]) -> list[str]:
        """`external_sources(rows, summary)` for the session's window (after `load`), walking only the
        rows that carry any when `rows` are the window's."""
        window = self._windows.get(session_id)
        if window is None or not _extends(rows, window.rows):
            return external_sources(rows, window.summary if window is not None else None)
        return external_sources(window.external_rows + rows[len(window.rows):], window.summary)

    def fill(self, session_id: str) -> int:
        """Characters of stored history in the session's window (0 when it is not loaded)."""
        window = self._windows.get(session_id)
        if window is None:
            return 0
        return window.chars + (_size(window.summary) if window.summary else 0)

    def dropped(self, session_id: str) -> bool:
        """Whether the session's window left out unsummarised rows (False when it is not loaded)."""
        window = self._windows.get(session_id)
        return window is not None and window.dropped

    def summary(self, session_id: str) -> MessageRecord | None:
        """The summary the session's window starts with (after `load`)."""
        window = self._windows.get(session_id)
        return window.summary if window is not None else None


UNKNOWN_OUTCOME = ("Outcome unknown: the process stopped while this ran. It was not run again; check whether "
                   "it happened (for example with task_list, or by asking the owner) before calling it again.")


def _drop_orphans(msgs: list[ChatMessage]) -> list[ChatMessage]:
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
