"""Anthropic's Messages API as it documents itself, for the fake model (tests/support/provider_rules.py
has the other shapes and says how they are used): responses whole and streamed block by block, and
`AnthropicThinking`, the rules of extended thinking (docs.claude.com, "Extended thinking"): `thinking`
and `redacted_thinking` blocks with signatures; while a tool loop runs the last assistant message must
start with one, and each one sent back must be unchanged; `budget_tokens` at least 1024 and below
`max_tokens`; no field the API does not know (so no `cache_control` on a thinking block); and, from
"Prompt caching", at most four blocks with `cache_control` in a request (tools, system and messages).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.support.model_wire import Kind, Raw, Status, Step

ids = itertools.count(1)  # ids and signatures of every shape's responses


def pieces(text: str, size: int = 5) -> list[str]:
    """`text` in small pieces, so tags and words are split across chunks as a real stream splits them."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def anthropic_raw(model: str, content: list[dict[str, Any]], stop_reason: str) -> Raw:
    """A Messages API response: `content` whole, or streamed block by block as the API streams it."""
    n = next(ids)
    usage = {"input_tokens": 20, "output_tokens": 10}
    body = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}
    events: list[tuple[str | None, Any] | bytes] = [
        ("message_start", {"type": "message_start", "message": {**body, "content": [], "stop_reason": None,
                                                                 "usage": {**usage, "output_tokens": 1}}})]

    def delta(index: int, value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": value}

    for index, block in enumerate(content):
        kind = block["type"]
        opened = {"thinking": {"type": "thinking", "thinking": ""}, "text": {"type": "text", "text": ""},
                  "tool_use": {**block, "input": {}}}.get(kind, block)
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}))
        if kind == "thinking":
            events += [delta(index, {"type": "thinking_delta", "thinking": p}) for p in pieces(block["thinking"], 9)]
            events.append(delta(index, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "text":
            events += [delta(index, {"type": "text_delta", "text": p}) for p in pieces(block["text"])]
        elif kind == "tool_use":
            events += [delta(index, {"type": "input_json_delta", "partial_json": p})
                       for p in pieces(json.dumps(block["input"]), 4)]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return Raw(body, tuple(events))


def anthropic_error(status: int, message: str, kind: str = "invalid_request_error") -> Status:
    return Status(status, body={"type": "error", "error": {"type": kind, "message": message}})


def breakpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks of a Messages API request that carry `cache_control`: tools, system, then messages."""
    system = body.get("system")
    blocks = list(body.get("tools") or []) + (system if isinstance(system, list) else [])
    for m in body.get("messages") or []:
        blocks += m["content"] if isinstance(m["content"], list) else []
    return [b for b in blocks if "cache_control" in b]


_BLOCK_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"}, "image": {"type", "source", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"}, "redacted_thinking": {"type", "data"},
}
_THINKING_FIRST = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` "
    "is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
    "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid "
    "this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


class AnthropicThinking:
    """Claude with extended thinking on https://api.anthropic.com."""

    model = "claude-sonnet-4-5"

    def __init__(self, redacted: bool = False) -> None:
        self.redacted = redacted  # also hand out a redacted_thinking block (safety-flagged reasoning)
        self.issued: list[dict[str, Any]] = []

    def _thinking(self, thought: str) -> list[dict[str, Any]]:
        blocks = [{"type": "thinking", "thinking": thought, "signature": f"EqQBCgIYAh{next(ids):06d}signature=="}]
        if self.redacted:
            blocks.append({"type": "redacted_thinking", "data": f"EmwKAhgBEgy3va{next(ids):06d}redacted"})
        self.issued += blocks
        return blocks

    def calls(self, *calls: tuple[str, dict[str, Any]], thought: str = "The owner wants a task made; use the tool.",
              text: str = "") -> Raw:
        content = self._thinking(thought) + ([{"type": "text", "text": text}] if text else [])
        content += [{"type": "tool_use", "id": f"toolu_{next(ids):06d}", "name": n, "input": a} for n, a in calls]
        return anthropic_raw(self.model, content, "tool_use")

    def reply(self, text: str, thought: str = "It is done; tell the owner.") -> Raw:
        return anthropic_raw(self.model, [*self._thinking(thought), {"type": "text", "text": text}], "end_turn")

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        messages = body.get("messages") or []
        if (marked := len(breakpoints(body))) > 4:
            return anthropic_error(400, f"A maximum of 4 blocks with cache_control may be provided. Found {marked}.")
        for i, m in enumerate(messages):
            for j, block in enumerate(m["content"] if isinstance(m["content"], list) else []):
                extra = set(block) - _BLOCK_FIELDS.get(block.get("type"), set(block))
                if extra:
                    return anthropic_error(400, f"messages.{i}.content.{j}.{block['type']}.{sorted(extra)[0]}: "
                                                "Extra inputs are not permitted")
                if block.get("type") in ("thinking", "redacted_thinking") and block not in self.issued:
                    return anthropic_error(400, f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        thinking = body.get("thinking") or {}
        if thinking.get("type") != "enabled":
            return None
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return anthropic_error(400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= body["max_tokens"]:
            return anthropic_error(400, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                                        "our documentation at https://docs.claude.com/en/docs/build-with-claude/"
                                        "extended-thinking#max-tokens-and-context-window-size")
        last = messages[-1]
        if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
            i = len(messages) - 2
            first = messages[i]["content"][0]["type"] if isinstance(messages[i]["content"], list) else "text"
            if first not in ("thinking", "redacted_thinking"):
                return anthropic_error(400, _THINKING_FIRST.format(i=i, found=first))
        return None
