"""The OpenAI chat-completions wire format (OpenAI itself and the many servers that speak it:
vLLM, llama.cpp, Ollama, OpenRouter, LiteLLM...).

`base_url` includes the API version, as those servers document it: "https://api.openai.com/v1",
"http://localhost:11434/v1". The client POSTs to `{base_url}/chat/completions`.

What these servers return beside the documented fields and require back is kept (gateway/llm/extras.py)
and replayed to the same server: DeepSeek's `reasoning_content` on the assistant messages of a turn that
called tools (its thinking mode answers 400 without it), Gemini's `extra_content` (thought signatures) on
the message and on each tool call. Reasoning is never shown: `reasoning_content` and OpenRouter's and
Ollama's `reasoning` are not text, and a leading `<think>` block in the content is taken out
(gateway/llm/think.py). A refusal (`refusal`) becomes a reply saying so (gateway/llm/refusal.py).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal
from urllib.parse import urlsplit

from gateway.llm.bounds import Budget
from gateway.llm.errors import ErrorEvent
from gateway.llm.extras import extras_for, source_of
from gateway.llm.http import HttpModelClient
from gateway.llm.refusal import declined, without_refused
from gateway.llm.think import ONLY_THINKING, ThinkFilter, strip_think
from gateway.llm.types import ChatMessage, ModelReply, ProviderExtras, Restart, TextSink, ToolCall, ToolSchema, Usage
from gateway.llm.wire import encode

TokensField = Literal["max_tokens", "max_completion_tokens"]
# OpenAI's reasoning models (and every newer one) reject `max_tokens` with a 400 naming
# `max_completion_tokens`; the older name is what vLLM, llama.cpp and Ollama understand.
_COMPLETION_TOKENS_PREFIXES = ("gpt-5", "o1", "o3", "o4")
ReasoningEffort = Literal["", "low", "medium", "high"]
# Opaque fields of an assistant message a server wants back (DeepSeek's reasoning, Gemini's signatures),
# and those of a tool call besides the documented ones.
_MESSAGE_EXTRAS = ("reasoning_content", "extra_content")
_CALL_FIELDS = frozenset({"id", "type", "function", "index"})


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
    (`tokens_field`), so a fallback model of another family gets its own. `reasoning_effort` asks a
    reasoning model for that much thinking, in the field its server documents (`reasoning_effort`;
    OpenRouter's `reasoning.effort`)."""

    def __init__(self, *args: Any, max_tokens_field: TokensField | None = None,
                 reasoning_effort: ReasoningEffort = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_tokens_field = max_tokens_field
        self.reasoning_effort = reasoning_effort
        self.source = source_of("openai", self._where)

    async def complete(self, messages: list[ChatMessage], tools: list[ToolSchema],
                       on_text: TextSink | None = None) -> ModelReply:
        reply = await super().complete(messages, tools, on_text)
        return _keep_reasoning(reply, messages)

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        # Local servers usually need no key; sending "Bearer " with nothing after it confuses some.
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def request_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str) -> dict[str, Any]:
        return self._body(model, [self._wire_message(m) for m in without_refused(messages)],
                          _wire_tools(tools) if tools else None)

    def encoded_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str, *,
                     stream: bool) -> bytes:
        # request_body's fields in its order, with the messages and tools encoded through the cache
        body = self._body(model, self._wire.messages(without_refused(messages), self._wire_message),
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
        if self.reasoning_effort:
            if urlsplit(self.base_url).hostname == "openrouter.ai":
                body["reasoning"] = {"effort": self.reasoning_effort}
            else:
                body["reasoning_effort"] = self.reasoning_effort
        return body

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        # include_usage: the last chunk before [DONE] carries the usage, which is otherwise not streamed.
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def stream_reader(self, model: str) -> OpenAIStream:
        return OpenAIStream(model, self.source)

    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        message = data["choices"][0]["message"]
        usage = read_usage(data.get("usage") or {})
        model = data.get("model") or model
        if isinstance(message.get("refusal"), str) and message["refusal"]:
            return ModelReply(text=declined(message["refusal"]), usage=usage, model=model, refused=True)
        raw_calls = message.get("tool_calls") or []
        calls = [_read_call(c) for c in raw_calls]
        extras = _extras(self.source, {k: message[k] for k in _MESSAGE_EXTRAS if message.get(k) is not None},
                         {call.id: _call_extras(raw) for call, raw in zip(calls, raw_calls, strict=True)})
        content = message.get("content") or ""
        text = strip_think(content)
        return ModelReply(text=ONLY_THINKING if content and not text and not calls else text, tool_calls=calls,
                          usage=usage, model=model, extras=extras)

    def _wire_message(self, m: ChatMessage) -> dict[str, Any]:
        wire = _wire_message(m)
        extras = extras_for(m, self.source) if m.role == "assistant" else None
        if extras is not None:
            wire.update(extras.message)
            for call in wire.get("tool_calls") or ():
                call.update(extras.calls.get(call["id"], {}))
        return wire


class OpenAIStream:
    """Chunks of a streamed chat completion: text deltas, tool calls in pieces keyed by their index
    (id and name in the first piece, the arguments spread over the rest), the usage in the last chunk.

    Gemini streams each tool call whole in one chunk without an `index`: a piece without one continues
    the call being built unless it brings a different `id`, which starts a new call.

    Growing text (content, reasoning, arguments) is kept as its pieces and joined once, and all of it
    counts against the answer's `Budget`."""

    def __init__(self, model: str, source: str) -> None:
        self.model = model
        self.source = source
        self.complete = False
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}  # each with its arguments as a list of pieces
        self._last: int | None = None  # the key of the call last added to
        self._usage: dict[str, Any] = {}
        self._message: dict[str, Any] = {}  # the message's opaque fields (extra_content)
        self._reasoning: list[str] = []  # DeepSeek's reasoning_content, in pieces
        self._refusal: list[str] = []
        self._think = ThinkFilter()
        self._budget = Budget()

    def feed(self, event: str, data: str) -> str:
        if data.strip() == "[DONE]":
            self.complete = True
            return self._shown([self._think.end()])
        chunk = json.loads(data)
        if chunk.get("error"):  # some servers report a failure mid-stream as a chunk
            raise ErrorEvent(data)
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        shown: list[str] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for piece in delta.get("tool_calls") or []:
                self._add_call(piece)
            if isinstance(delta.get("reasoning_content"), str):
                self._reasoning.append(self._budget.take(delta["reasoning_content"]))
            if delta.get("extra_content") is not None:
                self._message["extra_content"] = delta["extra_content"]
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(self._budget.take(delta["refusal"]))
            shown.append(self._think.feed(self._budget.take(delta.get("content") or "")))
            if choice.get("finish_reason"):
                # Servers that omit [DONE] still end every choice with a finish reason.
                self.complete = True
        if self.complete:
            shown.append(self._think.end())
        return self._shown(shown)

    def _shown(self, pieces: list[str]) -> str:
        """The text of one chunk's `pieces`; from the last `Restart` on, when one found what was shown
        before it to be reasoning (it then starts the reply's text over)."""
        restart = next((i for i in range(len(pieces) - 1, -1, -1) if isinstance(pieces[i], Restart)), None)
        if restart is not None:
            self._text, pieces = [], pieces[restart:]
        text = "".join(pieces)
        self._text.append(text)
        if self._refusal:
            return ""
        return Restart(text) if restart is not None else text

    def _add_call(self, piece: dict[str, Any]) -> None:
        if "index" in piece:
            key = int(piece["index"] or 0)
        elif self._last is None or (piece.get("id") and piece["id"] != self._calls[self._last]["id"]):
            key = max(self._calls, default=-1) + 1
        else:
            key = self._last
        self._last = key
        call = self._calls.setdefault(key, {"id": "", "name": "", "arguments": [], "extras": {}})
        function = piece.get("function") or {}
        call["id"] = self._budget.take(piece.get("id") or "") or call["id"]
        call["name"] = self._budget.take(function.get("name") or "") or call["name"]
        call["arguments"].append(self._budget.take(function.get("arguments") or ""))
        extras = _call_extras(piece)
        if extras:  # opaque JSON kept verbatim, counted as its text
            self._budget.take(json.dumps(extras))
            call["extras"].update(extras)

    def reply(self) -> ModelReply:
        usage = read_usage(self._usage)
        if self._refusal:
            return ModelReply(text=declined("".join(self._refusal)), usage=usage, model=self.model, refused=True)
        built = [(_read_call({"id": c["id"], "function": {"name": c["name"],
                                                           "arguments": "".join(c["arguments"]) or "{}"}}),
                  c["extras"]) for _, c in sorted(self._calls.items())]
        calls = [call for call, _ in built]
        text = "".join(self._text)
        if self._think.thinking and not text.strip() and not calls:
            text = ONLY_THINKING
        message = {**self._message, "reasoning_content": "".join(self._reasoning)} if self._reasoning \
            else self._message
        return ModelReply(text=text, tool_calls=calls, usage=usage, model=self.model,
                          extras=_extras(self.source, message, {call.id: e for call, e in built}))


def _call_extras(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's fields besides the documented ones (Gemini's `extra_content`), verbatim."""
    return {k: v for k, v in call.items() if k not in _CALL_FIELDS and v is not None}


def _extras(source: str, message: dict[str, Any], calls: dict[str, dict[str, Any]]) -> ProviderExtras | None:
    calls = {k: v for k, v in calls.items() if v}
    return ProviderExtras(source=source, message=message, calls=calls) if message or calls else None


def _keep_reasoning(reply: ModelReply, messages: list[ChatMessage]) -> ModelReply:
    """DeepSeek wants `reasoning_content` back on the assistant messages of a turn that called tools, and
    ignores it elsewhere: it is kept for the calls and for the answer that follows them, not otherwise."""
    extras = reply.extras
    if extras is None or "reasoning_content" not in extras.message:
        return reply
    if reply.tool_calls or (messages and messages[-1].role == "tool"):
        return reply
    message = {k: v for k, v in extras.message.items() if k != "reasoning_content"}
    kept = _extras(extras.source, message, extras.calls)
    return reply.model_copy(update={"extras": kept})


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
