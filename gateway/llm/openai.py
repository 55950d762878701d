"""The OpenAI chat-completions wire format (OpenAI itself and the many servers that speak it:
vLLM, llama.cpp, Ollama, OpenRouter, LiteLLM...).

`base_url` includes the API version, as those servers document it: "https://api.openai.com/v1",
"http://localhost:11434/v1". The client POSTs to `{base_url}/chat/completions`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal
from urllib.parse import urlsplit

from gateway.llm.http import HttpModelClient
from gateway.llm.retry import TransientError
from gateway.llm.types import ChatMessage, ModelReply, ToolCall, ToolSchema, Usage
from gateway.llm.wire import encode

TokensField = Literal["max_tokens", "max_completion_tokens"]
# OpenAI's reasoning models (and every newer one) reject `max_tokens` with a 400 naming
# `max_completion_tokens`; the older name is what vLLM, llama.cpp and Ollama understand.
_COMPLETION_TOKENS_PREFIXES = ("gpt-5", "o1", "o3", "o4")


def tokens_field(base_url: str, model: str, override: TokensField | None = None) -> TokensField:
    """The body field that caps the reply length for `model` at `base_url`: `override` when set, else
    `max_completion_tokens` for OpenAI itself and for its model families that require it, else
    `max_tokens`. A router's "openai/gpt-5" is judged by its last part."""
    if override:
        return override
    name = model.rsplit("/", 1)[-1].lower()
    if urlsplit(base_url).hostname == "api.openai.com" or name.startswith(_COMPLETION_TOKENS_PREFIXES):
        return "max_completion_tokens"
    return "max_tokens"


class OpenAIClient(HttpModelClient):
    """ModelClient for an OpenAI-compatible chat-completions endpoint, whole or streamed (SSE).

    `max_tokens_field` forces the name of the reply-length field; None chooses it per model
    (`tokens_field`), so a fallback model of another family gets its own."""

    def __init__(self, *args: Any, max_tokens_field: TokensField | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_tokens_field = max_tokens_field

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        # Local servers usually need no key; sending "Bearer " with nothing after it confuses some.
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def request_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str) -> dict[str, Any]:
        return self._body(model, [_wire_message(m) for m in messages], _wire_tools(tools) if tools else None)

    def encoded_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str, *,
                     stream: bool) -> bytes:
        # request_body's fields in its order, with the messages and tools encoded through the cache
        body = self._body(model, self._wire.messages(messages, _wire_message),
                          self._wire.tools(tools, _wire_tools) if tools else None)
        return encode(self.stream_body(body) if stream else body)

    def _body(self, model: str, messages: object, tools: object | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            tokens_field(self.base_url, model, self.max_tokens_field): self.max_tokens,
            "stream": False,
        }
        if tools is not None:
            body["tools"] = tools
        return body

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        # include_usage: the last chunk before [DONE] carries the usage, which is otherwise not streamed.
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def stream_reader(self, model: str) -> OpenAIStream:
        return OpenAIStream(model)

    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        message = data["choices"][0]["message"]
        calls = [_read_call(c) for c in message.get("tool_calls") or []]
        usage = data.get("usage") or {}
        return ModelReply(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=read_usage(usage),
            model=data.get("model") or model,
        )


class OpenAIStream:
    """Chunks of a streamed chat completion: text deltas, tool calls in pieces keyed by their index
    (id and name in the first piece, the arguments spread over the rest), the usage in the last chunk."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.complete = False
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._usage: dict[str, Any] = {}

    def feed(self, event: str, data: str) -> str:
        if data.strip() == "[DONE]":
            self.complete = True
            return ""
        chunk = json.loads(data)
        error = chunk.get("error")
        if error:  # some servers report a failure mid-stream as a chunk
            raise TransientError(str(error.get("message") if isinstance(error, dict) else error))
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for piece in delta.get("tool_calls") or []:
                call = self._calls.setdefault(int(piece.get("index") or 0), {"id": "", "name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["id"] = piece.get("id") or call["id"]
                call["name"] = function.get("name") or call["name"]
                call["arguments"] += function.get("arguments") or ""
            text += delta.get("content") or ""
            if choice.get("finish_reason"):
                # Servers that omit [DONE] still end every choice with a finish reason.
                self.complete = True
        self._text.append(text)
        return text

    def reply(self) -> ModelReply:
        calls = [_read_call({"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"] or "{}"}})
                 for _, c in sorted(self._calls.items())]
        return ModelReply(text="".join(self._text), tool_calls=calls, usage=read_usage(self._usage), model=self.model)


def _wire_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]


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


def read_usage(usage: dict[str, Any]) -> Usage:
    """Chat-completions usage: `prompt_tokens` includes the cached ones, which
    `prompt_tokens_details.cached_tokens` reports."""
    details = usage.get("prompt_tokens_details") or {}
    return Usage(input_tokens=usage.get("prompt_tokens") or 0, output_tokens=usage.get("completion_tokens") or 0,
                 cached_tokens=details.get("cached_tokens") or 0)
