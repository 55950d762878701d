"""Request bodies as the bytes that go on the wire, with the JSON of what recurs from request to request
encoded once.

A conversation's request repeats nearly everything the previous one sent: the history window (tens of
KB once it is full) and the tools array. Encoding all of it again was about half a millisecond of every
request here, more than the rest of the client. `WireCache` keeps the encoding of each message and of
each tools array it has seen, so a request encodes only what is new (the system prompt with its clock,
the latest turn) and splices the rest in. The bytes are exactly what `json.dumps` of the whole body
would give with httpx's own settings (compact, UTF-8, no NaN), so the wire does not change.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gateway.llm.types import ChatMessage, ToolSchema

# The encodings kept, the oldest dropped first: a full default window encodes to ~60 KB, so this holds
# the recent messages of a few dozen busy sessions (the messages themselves are mostly the history
# windows' own).
CACHE_BYTES = 2_000_000
_TOOL_ARRAYS = 32  # distinct tools arrays kept (one per selection in use)


class Encoded(bytes):
    """A value already encoded as JSON, spliced into a body by `encode` as it is."""


def dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, as httpx encodes a `json=` body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def encode(body: dict[str, Any]) -> bytes:
    """A request body (a dict whose values may be `Encoded`) as the bytes `dumps` of it would give."""
    return b"{" + b",".join(dumps(k) + b":" + (v if isinstance(v, Encoded) else dumps(v))
                            for k, v in body.items()) + b"}"


class WireCache:
    """One client's encodings of messages and of tools arrays, bounded at `max_bytes` of message encodings
    (oldest first out) and `_TOOL_ARRAYS` tools arrays, by the identity of the objects: a
    ChatMessage is frozen, and the history window hands the same ones from turn to turn; a ToolSchema
    is never changed once made (the runtime builds one per tool; a new tool list, an MCP server's say,
    brings new objects). An entry holds its objects, so their ids are not reused while it is cached."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        # Oldest first, by when they were encoded (a message still in use that falls out is encoded
        # again, once). The encodings are apart from the messages they hold so that a request's lookups
        # touch nothing but the encodings. An OrderedDict, not a dict: a dict emptied from the front
        # finds its first item by skipping every slot freed before it, and a soak's py-spy showed that
        # walk growing to a third of the cache's time once it was full.
        self._parts: OrderedDict[int, bytes] = OrderedDict()
        self._held: dict[int, ChatMessage] = {}
        self._bytes = 0
        self._tools: OrderedDict[tuple[int, ...], tuple[tuple[ToolSchema, ...], Encoded]] = OrderedDict()

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def messages(self, messages: list[ChatMessage], to_wire: Callable[[ChatMessage], Any]) -> Encoded:
        """The JSON array of `to_wire(m)` for each message, encoding only the messages not seen lately."""
        cached = self._parts.get
        parts: list[bytes] = []
        for m in messages:
            part = cached(id(m))
            if part is None:
                part = dumps(to_wire(m))
                # Images are large and rarely repeated; a system prompt is new every turn (it carries the
                # time): neither is worth a place, and a soak showed system prompts filling the cache and
                # pushing out the history it is for.
                if not m.images and m.role != "system":
                    self._parts[id(m)], self._held[id(m)] = part, m
                    self._bytes += len(part)
            parts.append(part)
        while self._bytes > self.max_bytes:
            oldest, part = self._parts.popitem(last=False)
            self._bytes -= len(part)
            del self._held[oldest]
        return Encoded(b"[" + b",".join(parts) + b"]")

    def tools(self, tools: list[ToolSchema], to_wire: Callable[[list[ToolSchema]], Any]) -> Encoded:
        """`to_wire(tools)` encoded, once per distinct list of schema objects."""
        key = tuple(id(t) for t in tools)
        hit = self._tools.get(key)
        if hit is not None:
            self._tools.move_to_end(key)
            return hit[1]
        encoded = Encoded(dumps(to_wire(tools)))
        self._tools[key] = (tuple(tools), encoded)
        if len(self._tools) > _TOOL_ARRAYS:
            self._tools.popitem(last=False)
        return encoded
