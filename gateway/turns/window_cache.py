"""The history windows kept in memory from turn to turn, so a turn's work is proportional to what is
new in it, not to the window's length.

A session's window (`Window`) is topped up with the rows written since its last one and cut by whole
turns from its oldest end, keeping as running totals what a turn would otherwise recompute over the
whole window: characters and messages against the budget, bytes against the cache's bound, the rows
converted to chat messages (the same objects from turn to turn, so `gateway.llm.wire` reuses their
encoding and the request's history is a stable prefix for a provider's prompt cache), the rows that
carry outside content (taint), and the tool calls not yet answered (pairing).
"""

from __future__ import annotations

import operator
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gateway.llm.types import ChatMessage
from gateway.turns.history import (
    Since,
    WindowRead,
    drop_orphans,
    external_sources,
    fit_history,
    fit_images,
    read_window,
    row_chars,
    to_chat,
    window_budget,
)
from store.messages import Messages
from store.records import MessageRecord

T = TypeVar("T")

# The cache of windows is bounded in bytes, least recently used evicted first (an evicted session is read
# again from the store on its next turn, which costs a whole window's read: the bound must hold every
# session that talks at once, or each turn of theirs pays for it).
CACHE_BYTES = 16_000_000  # about 30 full windows of the default 200 messages
# The newest whole turns of a window number at most this many messages by default (`[runtime]
# context_max_messages`): short messages would otherwise fill the character budget with a thousand.
MAX_MESSAGES = 200
# What a cached row costs besides its content: the record and its converted chat message with their
# small strings, lists and dicts (measured with tracemalloc, tests/test_history_cache.py).
ROW_BYTES = 2_400


def _bytes(msg: MessageRecord) -> int:
    """About what a cached row holds in memory: its strings (images included) and the objects around them."""
    images = sum(sys.getsizeof(i.get("data", "")) for i in msg.meta.get("images", ()))
    calls = sum(sys.getsizeof(c.arguments) for c in msg.tool_calls)
    return ROW_BYTES + sys.getsizeof(msg.content) + calls + images


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
    turns: dict[str, int] = field(default_factory=dict)  # rows per turn id
    nbytes: int = 0  # of the rows and the summary
    chats: dict[int, ChatMessage] = field(default_factory=dict)  # stored rows already converted
    sizes: dict[int, int] = field(default_factory=dict)  # and already measured
    # Kept along with the rows so a turn does not walk the whole window again: the rows as chat
    # messages, the rows that carry outside content, how many carry images, and per tool call id the
    # calls less the results (none left: no row is an orphan, and the view is the chat messages).
    chat_rows: list[ChatMessage] = field(default_factory=list)
    external_rows: list[MessageRecord] = field(default_factory=list)
    images: int = 0
    unpaired: dict[str | None, int] = field(default_factory=dict)

    @property
    def since(self) -> Since:
        return Since(self.epoch, self.last_id)

    def holds(self, turn_id: str) -> bool:
        """Whether rows of the turn are in the window."""
        return turn_id in self.turns

    def turn_end(self, start: int) -> int:
        """The index after the last row of the turn whose first row is at `start`."""
        end, turn_id = start, self.rows[start].turn_id
        while end < len(self.rows) and self.rows[end].turn_id == turn_id:
            end += 1
        return end

    def size(self, msg: MessageRecord) -> int:
        return _once(self.sizes, msg, row_chars)

    def chat(self, msg: MessageRecord) -> ChatMessage:
        return _once(self.chats, msg, to_chat)

    def extend(self, new: list[MessageRecord], budget: int, max_messages: int) -> None:
        """Add rows newer than the window's, then drop whole turns from the oldest end while it is over
        `budget` characters or `max_messages` rows (the newest turn stays, even alone over them): what
        `newest_turns` keeps."""
        for m in new:
            self.rows.append(m)
            self.chat_rows.append(self.chat(m))
            self._count(m, 1)
            self.chars += self.size(m)
            self.nbytes += _bytes(m)
            self.last_id = max(self.last_id, m.id or 0)
        cut = 0
        while self.chars > budget or len(self.rows) - cut > max_messages:
            end = self.turn_end(cut)
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
        _add(self.turns, m.turn_id, sign)
        if m.role == "assistant":  # as to_chat has it: only an assistant message carries calls
            for c in m.tool_calls:
                _add(self.unpaired, c.id, sign)
        if m.role == "tool":  # a result without a call id (None) is never answered: never plain
            _add(self.unpaired, m.tool_call_id, -sign)

    def plain(self) -> bool:
        """Whether the rows' view is their chat messages as they are: no images to fit, no orphans."""
        return not self.images and not self.unpaired


def _add(counts: dict[T, int], key: T, n: int) -> None:
    """counts[key] += n, keeping no zeros (an empty dict: every count is zero)."""
    value = counts.get(key, 0) + n
    if value:
        counts[key] = value
    else:
        del counts[key]


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
    context budget) and in messages (`max_messages`), all of them together in bytes (`max_bytes`,
    `CACHE_BYTES` = 16 MB by default, least recently used evicted first; tests/test_history_cache.py fills
    it past its bound).
    """

    def __init__(self, messages: Messages, budget_chars: int, max_messages: int = MAX_MESSAGES,
                 max_bytes: int = CACHE_BYTES) -> None:
        self.messages = messages
        self.budget = budget_chars
        self.max_messages = max_messages
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
        read = await self.messages.store.read(
            lambda db: read_window(db, session_id, epoch, since, self.budget, self.max_messages))
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
        window.extend(read.rows, window_budget(self.budget, window.summary), self.max_messages)
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
        rather than per turn. When `rows` are the window and then this turn's, the oldest whole turns that
        make room for this turn's rows are left out by the running totals, not by measuring all of them."""
        window = self._windows.get(session_id)
        if window is None:
            return fit_history(rows, self.budget, max_messages=self.max_messages)
        head = [window.chat(window.summary)] if window.summary is not None else []
        budget = window_budget(self.budget, window.summary)
        n = len(window.rows)
        if _extends(rows, window.rows):  # the window, then this turn's rows
            tail = rows[n:]
            used, count, cut = window.chars + sum(window.size(m) for m in tail), len(rows), 0
            newest = rows[-1].turn_id if rows else None
            while (used > budget or count > self.max_messages) and cut < n and window.rows[cut].turn_id != newest:
                end = window.turn_end(cut)  # the window's oldest turn left makes room, as newest_turns would
                used -= sum(window.size(m) for m in window.rows[cut:end])
                count, cut = count - (end - cut), end
            if used <= budget and count <= self.max_messages:  # the usual case: nothing to measure again
                if window.plain() and all(_plain(m) for m in tail):  # and nothing to drop or fit either
                    return head + window.chat_rows[cut:] + [window.chat(m) for m in tail]
                return head + drop_orphans(fit_images([window.chat(m) for m in rows[cut:]], budget - used))
        return head + fit_history(rows, budget, window.chat, window.size, self.max_messages)

    def external_sources(self, session_id: str, rows: list[MessageRecord]) -> list[str]:
        """`external_sources(rows, summary)` for the session's window (after `load`), walking only the
        rows that carry any when `rows` are the window's."""
        window = self._windows.get(session_id)
        if window is None or not _extends(rows, window.rows):
            return external_sources(rows, window.summary if window is not None else None)
        return external_sources(window.external_rows + rows[len(window.rows):], window.summary)

    def fill(self, session_id: str) -> float:
        """How full the session's window is, as the larger share of its budgets in characters and in
        messages (0 when it is not loaded)."""
        window = self._windows.get(session_id)
        if window is None:
            return 0.0
        return max(self.chars(session_id) / self.budget, len(window.rows) / self.max_messages)

    def chars(self, session_id: str) -> int:
        """Characters of stored history in the session's window (0 when it is not loaded)."""
        window = self._windows.get(session_id)
        if window is None:
            return 0
        return window.chars + (row_chars(window.summary) if window.summary else 0)

    def dropped(self, session_id: str) -> bool:
        """Whether the session's window left out unsummarised rows (False when it is not loaded)."""
        window = self._windows.get(session_id)
        return window is not None and window.dropped

    def summary(self, session_id: str) -> MessageRecord | None:
        """The summary the session's window starts with (after `load`)."""
        window = self._windows.get(session_id)
        return window.summary if window is not None else None
