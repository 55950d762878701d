"""The Anthropic Messages API wire format.

`base_url` may be given with or without the version: "https://api.anthropic.com" and
"https://api.anthropic.com/v1" both POST to "https://api.anthropic.com/v1/messages". The rule: when the
base URL (trailing slashes ignored) ends in "/v1", "/messages" is appended; otherwise "/v1/messages".
"""

from __future__ import annotations

import json
from typing import Any

from gateway.llm.http import HttpModelClient
from gateway.llm.types import ChatMessage, ModelReply, ToolCall, ToolSchema, Usage

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicClient(HttpModelClient):
    """ModelClient for the Anthropic Messages API (non-streaming)."""

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
            "messages": wire_messages(messages),
        }
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in tools]
        return body

    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            if block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "tool_use":
                raw = block.get("input")
                # The API sends an object; a string is passed through untouched, like OpenAI's raw
                # arguments, so the runtime reports bad JSON to the model instead of us guessing.
                arguments = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {})
                calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        usage = data.get("usage") or {}
        return ModelReply(
            text="".join(texts),
            tool_calls=calls,
            usage=Usage(input_tokens=usage.get("input_tokens") or 0, output_tokens=usage.get("output_tokens") or 0),
            model=data.get("model") or model,
        )


def wire_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as Messages API turns: system messages left out (they go to `system`), tool
    results as `tool_result` blocks of a user turn, and consecutive turns of one role merged, since the
    API requires user and assistant to alternate. Within a merged user turn the tool results come first,
    as the API also requires."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        blocks = _blocks(m)
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


def _blocks(m: ChatMessage) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    # Images before the text that refers to them, as Anthropic's vision guide recommends.
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
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
