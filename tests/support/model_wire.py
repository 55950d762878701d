"""What the fake model server says and checks, in both wire formats (OpenAI chat completions and the
Anthropic Messages API). The server itself, its scripting API and the fixtures are in
tests/fixtures/model.py, which re-exports the step builders defined here.

A *step* is one scripted response: an `Answer` (text and/or tool calls), a `Status` (an HTTP error), a
`Hang` (no answer within any sensible client timeout), or a `Raw` provider-shaped response.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["openai", "anthropic"]

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")  # what both APIs accept
DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.+)", re.DOTALL)

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Call:
    """One tool call in an answer. `arguments` is the raw JSON text, possibly malformed on purpose."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Answer:
    """A successful response: text, tool calls, or both. `usage` is (input, output) or (input, output,
    cached) tokens, input counting the cached ones; when None the fake makes them up from the sizes of the
    request and the answer."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    usage: tuple[int, ...] | None = None
    cut_after: int | None = None  # streamed: stop after this many tokens, without the stream's end


@dataclass(frozen=True)
class Status:
    """An HTTP error response. `body` None means the provider's usual error JSON for `code`; a dict or a
    list is sent as JSON, a str as plain text."""

    code: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: dict[str, Any] | list[Any] | str | None = None


@dataclass(frozen=True)
class Hang:
    """Answer nothing for `seconds` (or until the fake is reset), then a 504 nobody is waiting for."""

    seconds: float


@dataclass(frozen=True)
class Raw:
    """A response exactly as a provider documents it (tests/support/provider_rules.py builds them):
    `body` answers a request that does not stream; `events` a streamed one, each an SSE event as
    (event name or None, data: a JSON value or a string sent as it is), or bytes sent as they are
    (a comment line, say), or a threading.Event the stream waits for (so a test sees what came before it)."""

    body: Any
    events: tuple[tuple[str | None, Any] | bytes | threading.Event, ...] = ()


Step = Answer | Status | Hang | Raw


def reply(text: str, *, usage: tuple[int, ...] | None = None) -> Answer:
    """A plain text answer."""
    return Answer(text=text, usage=usage)


def cut_off(text: str, after: int) -> Answer:
    """A streamed answer that breaks off after `after` tokens of `text` (a whole answer when not streamed)."""
    return Answer(text=text, cut_after=after)


def tool_call(name: str, args: dict[str, Any] | str | None = None, call_id: str | None = None, *,
              text: str = "", usage: tuple[int, ...] | None = None) -> Answer:
    """An answer calling one tool. `args` is a dict (sent as JSON) or raw JSON text sent exactly as given."""
    raw = args if isinstance(args, str) else json.dumps(args or {})
    return Answer(text=text, calls=(Call(name, raw, call_id),), usage=usage)


def tool_calls(calls: Iterable[Answer | Call | tuple[str, dict[str, Any] | str]], *, text: str = "",
               usage: tuple[int, ...] | None = None) -> Answer:
    """An answer calling several tools at once. Each item is a `tool_call(...)`, a `Call`, or a
    `(name, args)` pair: `tool_calls([tool_call("a", {}), ("b", {"x": 1})])`."""
    merged: list[Call] = []
    for item in calls:
        if isinstance(item, Answer):
            merged.extend(item.calls)
        elif isinstance(item, Call):
            merged.append(item)
        else:
            merged.extend(tool_call(*item).calls)
    return Answer(text=text, calls=tuple(merged), usage=usage)


def malformed_args(name: str, raw: str = "{not json", call_id: str | None = None) -> Answer:
    """A tool call whose arguments are not valid JSON. Over the Anthropic format, where `input` is
    always an object, the raw text is sent as a JSON string instead."""
    return tool_call(name, raw, call_id)


def status(code: int, headers: Mapping[str, str] | None = None, body: dict[str, Any] | str | None = None) -> Status:
    """An HTTP error, e.g. `status(429, {"Retry-After": "0.3"})` or `status(500)`."""
    return Status(code, dict(headers or {}), body)


def hang(seconds: float = 30.0) -> Hang:
    """No answer for `seconds`: use with a client timeout well below it."""
    return Hang(seconds)


@dataclass(frozen=True)
class ModelRequest:
    """One request the fake received: its path, parsed JSON body, headers (lower-case names) and size."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    size: int

    @property
    def kind(self) -> Kind:
        return "openai" if self.path == OPENAI_PATH else "anthropic"

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def said(self) -> list[dict[str, Any]]:
        """`messages` with the turn's `<context>` block taken off the user message carrying it: what the
        conversation says, for a test about the conversation rather than the context."""
        return [_without_context_message(m) for m in self.messages]

    @property
    def context(self) -> str:
        """The turn's `<context>` block ("" when the request has none)."""
        for said, sent in zip(self.said, self.messages, strict=True):
            if said != sent:
                text = sent["content"] if isinstance(sent["content"], str) else \
                    "".join(p.get("text", "") for p in sent["content"])
                return "<context>\n" + text.rpartition("<context>\n")[2]
        return ""

    @property
    def images(self) -> list[tuple[str, bytes]]:
        """Every image part of the request, oldest first, as (MIME type, decoded bytes): OpenAI
        `image_url` data URLs and Anthropic `image` blocks with a base64 source."""
        found: list[tuple[str, bytes]] = []
        for message in self.messages:
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                if part.get("type") == "image_url":
                    m = DATA_URL.fullmatch(part["image_url"]["url"])
                    if m:
                        found.append((m.group(1), base64.b64decode(m.group(2))))
                elif part.get("type") == "image":
                    found.append((part["source"]["media_type"], base64.b64decode(part["source"]["data"])))
        return found

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offered, in either format."""
        tools = self.body.get("tools") or []
        return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


def last_user_text(body: Mapping[str, Any]) -> str:
    """What the person wrote in the last user message holding text, in either format (tool results are
    skipped): without the `<context>` block Anyy adds after it (gateway/turns/prompt.py)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return without_context(content)
        texts = [part.get("text", "") for part in content or [] if part.get("type") == "text"]
        if texts:
            return without_context("\n".join(texts))
    return ""


def _without_context_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if message.get("role") != "user" or not content:
        return message
    if isinstance(content, str):
        return {**message, "content": without_context(content)}
    return {**message, "content": [{**p, "text": without_context(p["text"])} if p.get("type") == "text" else p
                                   for p in content]}


def without_context(text: str) -> str:
    """`text` without the turn's `<context>` block at its end (there is one on a turn's newest message)."""
    head, sep, tail = text.rpartition("<context>\n")
    return head.removesuffix("\n\n") if sep and tail.endswith("</context>") else text


def echo(body: Mapping[str, Any]) -> Step:
    """The default responder: `echo: <last user text>`."""
    return reply(f"echo: {last_user_text(body)}")


_ids = itertools.count(1)


def answer_body(kind: Kind, answer: Answer, request: Mapping[str, Any], request_size: int) -> dict[str, Any]:
    """The success response body for `answer`, in the request's format, echoing the requested model."""
    n = next(_ids)
    model = request.get("model", "fake")
    cached = 0
    if answer.usage:
        usage_in, usage_out, *rest = answer.usage
        cached = rest[0] if rest else 0
    else:
        usage_in = max(1, request_size // 4)
        usage_out = max(1, (len(answer.text) + sum(len(c.arguments) for c in answer.calls)) // 4)
    if kind == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
        if answer.calls:
            message["tool_calls"] = [
                {"id": c.id or f"call_{n}_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for i, c in enumerate(answer.calls)
            ]
        return {
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if answer.calls else "stop"}],
            "usage": {"prompt_tokens": usage_in, "completion_tokens": usage_out,
                      "total_tokens": usage_in + usage_out, "prompt_tokens_details": {"cached_tokens": cached}},
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    content.extend({"type": "tool_use", "id": c.id or f"toolu_{n}_{i}", "name": c.name, "input": _input(c.arguments)}
                   for i, c in enumerate(answer.calls))
    return {
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": usage_in - cached, "output_tokens": usage_out, "cache_read_input_tokens": cached,
                  "cache_creation_input_tokens": 0},
    }


def _input(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # malformed_args: the only way to carry bad JSON in this format


def error_body(kind: Kind, code: int, message: str) -> dict[str, Any]:
    """The provider's error JSON for an HTTP error."""
    error_type = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                  404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(code, "api_error")
    if kind == "openai":
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    return {"type": "error", "error": {"type": error_type, "message": message}}
