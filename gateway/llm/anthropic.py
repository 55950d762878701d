"""The Anthropic Messages API wire format.

`base_url` may be given with or without the version: "https://api.anthropic.com" and
"https://api.anthropic.com/v1" both POST to "https://api.anthropic.com/v1/messages". The rule: when the
base URL (trailing slashes ignored) ends in "/v1", "/messages" is appended; otherwise "/v1/messages".

Extended thinking (`thinking_budget`): the reply's `thinking` and `redacted_thinking` blocks are kept
verbatim, signatures and all (gateway/llm/extras.py), never shown, and sent back first in their assistant
message, before its `tool_use` blocks, as the API requires while a tool loop runs. A reply that ends with
`stop_reason: "refusal"` becomes a reply saying so (gateway/llm/refusal.py).
"""

from __future__ import annotations

import json
from typing import Any

from gateway.llm.bounds import Budget
from gateway.llm.errors import ErrorEvent
from gateway.llm.extras import extras_for, source_of
from gateway.llm.http import HttpModelClient
from gateway.llm.refusal import declined, without_refused
from gateway.llm.types import ChatMessage, ModelReply, ProviderExtras, ToolCall, ToolSchema, Usage

ANTHROPIC_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
_THINKING = ("thinking", "redacted_thinking")
# A content_block_delta's type -> the block field it grows; the delta's field holding the piece when named apart.
_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature",
           "input_json_delta": "input"}
_DELTA_VALUE = {"input": "partial_json"}
# Said for a refusal: the API gives no reason, only the stop reason (and the text cut off before it).
REFUSED = "it stopped this reply (stop_reason \"refusal\"); the exchange is left out of the conversation from now on"


class AnthropicClient(HttpModelClient):
    """ModelClient for the Anthropic Messages API, whole or streamed (SSE events). `thinking_budget`
    (tokens, 0 for off) turns extended thinking on."""

    def __init__(self, *args: Any, thinking_budget: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.thinking_budget = thinking_budget
        self.source = source_of("anthropic", self._where)

    def endpoint(self) -> str:
        if self.base_url.endswith("/v1"):
            return f"{self.base_url}/messages"
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def request_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": history_breakpoints(wire_messages(without_refused(messages), self.source)),
        }
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        system = system_blocks(messages)
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in tools]
            body["tools"][-1]["cache_control"] = CACHE  # the tools array is byte-stable for equal selections
        return body

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def stream_reader(self, model: str) -> AnthropicStream:
        return AnthropicStream(model, self.source)

    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        return _reply(data["content"], data.get("stop_reason"), read_usage(data.get("usage") or {}),
                      data.get("model") or model, self.source)


class AnthropicStream:
    """Messages API stream events: `message_start` (model, input usage), content blocks opened, grown by
    text, thinking, signature or partial-JSON deltas, and closed, `message_delta` (stop reason, output
    usage), `message_stop` (the end).

    Deltas are kept as their pieces, per block and field, and joined once at the end; the blocks and the
    pieces count against the answer's `Budget`."""

    def __init__(self, model: str, source: str) -> None:
        self.model = model
        self.source = source
        self.complete = False
        self._blocks: dict[int, dict[str, Any]] = {}
        # each block's growing fields in pieces: text, thinking, signature, and a tool_use's input JSON
        self._pieces: dict[int, dict[str, list[str]]] = {}
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._budget = Budget()

    def feed(self, event: str, data: str) -> str:
        payload = json.loads(data)
        kind = payload.get("type") or event
        if kind == "error":  # e.g. overloaded_error mid-stream
            raise ErrorEvent(data)
        if kind == "message_start":
            message = payload["message"]
            self.model = message.get("model") or self.model
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            index = int(payload["index"])
            self._budget.take(data)  # the block is kept as it came
            self._blocks[index] = dict(payload["content_block"])
            self._pieces[index] = {}
        elif kind == "content_block_delta":
            index, delta = int(payload["index"]), payload["delta"]
            field = _DELTAS.get(delta["type"])
            if field is not None:
                piece = self._budget.take(str(delta[_DELTA_VALUE.get(field, field)]))
                self._pieces[index].setdefault(field, []).append(piece)
                if field == "text":
                    return piece
        elif kind == "message_delta":
            self._stop = (payload.get("delta") or {}).get("stop_reason") or self._stop
            self._usage.update({k: v for k, v in (payload.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.complete = True
        return ""

    def reply(self) -> ModelReply:
        blocks = [self._built(i, b) for i, b in sorted(self._blocks.items())]
        return _reply(blocks, self._stop, read_usage(self._usage), self.model, self.source)

    def _built(self, index: int, block: dict[str, Any]) -> dict[str, Any]:
        """A block with its streamed pieces joined onto what its start carried."""
        grown = {field: block.get(field, "") + "".join(pieces) for field, pieces in self._pieces[index].items()
                 if field != "input"}
        if block["type"] == "tool_use":
            # A tool's input streams as JSON text; passed on as text, so bad JSON reaches the model as an error.
            grown["input"] = "".join(self._pieces[index].get("input", ())) or "{}"
        return {**block, **grown}


def _reply(content: list[dict[str, Any]], stop_reason: str | None, usage: Usage, model: str,
           source: str) -> ModelReply:
    """The reply in a message's content blocks (a tool_use input as an object, or as JSON text)."""
    if stop_reason == "refusal":
        return ModelReply(text=declined(REFUSED), usage=usage, model=model, refused=True)
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            raw = block.get("input")
            # The API sends an object; a string is passed through untouched, like OpenAI's raw
            # arguments, so the runtime reports bad JSON to the model instead of us guessing.
            arguments = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {})
            calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        elif block["type"] in _THINKING:
            thinking.append(block)
    extras = ProviderExtras(source=source, blocks=thinking) if thinking else None
    return ModelReply(text="".join(texts), tool_calls=calls, usage=usage, model=model, extras=extras)


def system_blocks(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The system messages as text blocks, with a cache breakpoint after each one's stable prefix."""
    blocks: list[dict[str, Any]] = []
    for m in messages:
        if m.role != "system" or not m.content:
            continue
        stable, rest = m.content[:m.stable_chars], m.content[m.stable_chars:]
        if stable:
            blocks.append({"type": "text", "text": stable, "cache_control": CACHE})
        if rest.strip():
            blocks.append({"type": "text", "text": rest.strip()})
    return blocks


def history_breakpoints(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`turns` with the cache breakpoints of the conversation (with the tools' and the system prompt's,
    four: the most a request may carry).

    - The history: the end of the assistant turn before the turn's own user message (the newest user turn
      holding text; it carries the turn's `<context>`, which the next turn's request will not repeat).
      The next turn marks a turn further on, and the API finds this entry by looking back over the blocks
      before its breakpoint (about 20), so each turn reads the history from the cache and writes what is new.
    - The tool loop: after a tool round, the end of the request, which the turn's next round repeats.

    A thinking block may not carry a breakpoint: it goes on the last block of the turn that may."""
    own = next((k for k in range(len(turns) - 1, -1, -1) if turns[k]["role"] == "user"
                and any(b["type"] != "tool_result" for b in turns[k]["content"])), None)
    if own is None:
        return turns
    if own > 0:
        _mark(turns[own - 1]["content"])
    if own < len(turns) - 1:
        _mark(turns[-1]["content"])
    return turns


def _mark(blocks: list[dict[str, Any]]) -> None:
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i]["type"] not in _THINKING:
            blocks[i] = {**blocks[i], "cache_control": CACHE}
            return


def read_usage(usage: dict[str, Any]) -> Usage:
    """Messages API usage: `input_tokens` excludes what was read from or written to the prompt cache, so
    the three are added up; cache reads are the cached tokens."""
    cached = usage.get("cache_read_input_tokens") or 0
    total_in = (usage.get("input_tokens") or 0) + cached + (usage.get("cache_creation_input_tokens") or 0)
    return Usage(input_tokens=total_in, output_tokens=usage.get("output_tokens") or 0, cached_tokens=cached)


def wire_messages(messages: list[ChatMessage], source: str = "") -> list[dict[str, Any]]:
    """The conversation as Messages API turns: system messages left out (they go to `system`), tool
    results as `tool_result` blocks of a user turn, and consecutive turns of one role merged, since the
    API requires user and assistant to alternate. Within a merged user turn the tool results come first,
    as the API also requires. Thinking blocks kept from `source` lead their assistant message."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        blocks = _blocks(m, source)
        if not blocks:  # an empty text block is rejected by the API; an empty turn carries nothing
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")  # stable: order kept otherwise
    return turns


def _blocks(m: ChatMessage, source: str) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    extras = extras_for(m, source) if m.role == "assistant" else None
    # Thinking first, verbatim (its signature covers it); images before the text that refers to them,
    # as Anthropic's vision guide recommends.
    blocks: list[dict[str, Any]] = list(extras.blocks) if extras is not None else []
    blocks += [{"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
               for i in m.images]
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    if m.role == "assistant":
        blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
                      for c in m.tool_calls)
    return blocks


def _input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object `tool_use.input` must be. Arguments that were never valid
    JSON (the runtime already told the model so in the tool result) are sent as an empty object, the
    only form the API accepts."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
