"""The fake model's streamed answers, in both wire formats: OpenAI chat-completion chunks ending in
`data: [DONE]`, and Anthropic Messages events ending in `message_stop`. Used by tests/fixtures/model.py
when a request asks for `stream: true`.

The text is streamed one word (with its leading space) per event: a token, for pacing. An answer with
`cut_after` stops after that many tokens without the stream's end, as a dropped connection would.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.model_wire import Answer, Kind, answer_body

_TOKEN = re.compile(r"\s*\S+\s*$|\s*\S+")


@dataclass
class Pace:
    """How fast the fake streams: the delay before the first token and the tokens per second after it
    (0: as fast as it can)."""

    first_token_s: float = 0.0
    tokens_per_s: float = 0.0

    def due_s(self, token: int) -> float:
        """When token number `token` (0-based) is due, in seconds after the request: fixed times, so
        the sleeps' own overshoot does not add up over a long answer."""
        return self.first_token_s + (token / self.tokens_per_s if self.tokens_per_s else 0.0)

    def whole_s(self, answer: Answer) -> float:
        """How long the whole answer takes to generate: when a request that does not stream is answered."""
        count = len(tokens(answer.text)) + 2 * len(answer.calls)
        return self.due_s(count - 1) if count else self.first_token_s


def tokens(text: str) -> list[str]:
    """The text in streamed pieces: each word with the whitespace before it."""
    return _TOKEN.findall(text) or ([text] if text else [])


def stream_events(kind: Kind, answer: Answer, request: Mapping[str, Any], size: int) -> Iterator[tuple[bytes, bool]]:
    """(SSE bytes, counts as a token) in order. Usage and ids are those of the whole answer."""
    whole = answer_body(kind, answer, request, size)
    pieces = tokens(answer.text)
    events = _openai(whole, pieces, request) if kind == "openai" else _anthropic(whole, pieces)
    sent = 0
    for data, is_token in events:
        if is_token:
            if sent == answer.cut_after:
                return
            sent += 1
        yield data, is_token


def _sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    # Raw UTF-8, as the providers stream it: a JSON string may hold U+2028 or U+0085 unescaped. A lone
    # surrogate has no UTF-8 form; JSON carries it only as its \u escape.
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    try:
        return ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()
    except UnicodeEncodeError:
        return _sse(json.dumps(data), event)


def _openai(whole: dict[str, Any], pieces: list[str], request: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": int(time.time()), "model": whole["model"]}
    choice = whole["choices"][0]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""}), False
    for piece in pieces:
        yield chunk({"content": piece}), True
    for index, call in enumerate(choice["message"].get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]}), False
        arguments = call["function"]["arguments"]
        for part in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}), True
    yield chunk({}, choice["finish_reason"]), False
    if (request.get("stream_options") or {}).get("include_usage"):
        yield _sse({**base, "choices": [], "usage": whole["usage"]}), False
    yield _sse("[DONE]"), False


def _anthropic(whole: dict[str, Any], pieces: list[str]) -> Iterator[tuple[bytes, bool]]:
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield _sse({"type": "message_start", "message": start}, "message_start"), False
    yield _sse({"type": "ping"}, "ping"), False
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        block_start = {"type": "content_block_start", "index": index, "content_block": opened}
        yield _sse(block_start, "content_block_start"), False
        if block["type"] == "text":
            for piece in pieces:
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}, "content_block_delta"), True
        else:
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            for part in (raw[:len(raw) // 2], raw[len(raw) // 2:]):
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part}}, "content_block_delta"), True
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop"), False
    yield _sse({"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta"), False
    yield _sse({"type": "message_stop"}, "message_stop"), False
