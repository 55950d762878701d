"""The OpenAI chat-completions wire format (OpenAI itself and the many servers that speak it:
vLLM, llama.cpp, Ollama, OpenRouter, LiteLLM...).

`base_url` includes the API version, as those servers document it: "https://api.openai.com/v1",
"http://localhost:11434/v1". The client POSTs to `{base_url}/chat/completions`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from gateway.llm.http import HttpModelClient
from gateway.llm.types import ChatMessage, ModelReply, ToolCall, ToolSchema, Usage


class OpenAIClient(HttpModelClient):
    """ModelClient for an OpenAI-compatible chat-completions endpoint (non-streaming)."""

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        # Local servers usually need no key; sending "Bearer " with nothing after it confuses some.
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def request_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [_wire_message(m) for m in messages],
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        if tools:
            body["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools
            ]
        return body

    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        message = data["choices"][0]["message"]
        calls = [_read_call(c) for c in message.get("tool_calls") or []]
        usage = data.get("usage") or {}
        return ModelReply(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=Usage(input_tokens=usage.get("prompt_tokens") or 0,
                        output_tokens=usage.get("completion_tokens") or 0),
            model=data.get("model") or model,
        )


def _wire_message(m: ChatMessage) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            # null, not "", beside tool calls: the documented form, and some servers reject "".
            "content": m.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ],
        }
    if m.images:
        # Text first, then the images, as OpenAI's vision guide shapes a user message.
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        parts += [{"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                  for i in m.images]
        return {"role": m.role, "content": parts}
    return {"role": m.role, "content": m.content}


def _read_call(call: dict[str, Any]) -> ToolCall:
    function = call["function"]
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        # A few compatible servers send an object; the runtime expects the JSON text.
        arguments = json.dumps(arguments if arguments is not None else {})
    # Some compatible servers omit the id; the transcript needs one to pair the result with the call.
    return ToolCall(id=call.get("id") or f"call_{uuid.uuid4().hex[:24]}", name=function["name"], arguments=arguments)
