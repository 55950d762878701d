"""What the fake model server checks of a request in each wire format (OpenAI chat completions and the
Anthropic Messages API): the rules both real APIs enforce and answer with a 400 — roles in order, a tool
call answered by its result and no result without its call, images of a type and encoding they accept.
Split from tests/support/model_wire.py, which says what the fake answers."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from tests.support.model_wire import DATA_URL, IMAGE_TYPES, Kind


def wire_problem(kind: Kind, body: Any, headers: Mapping[str, str]) -> str | None:
    """Why the real API would reject this request with a 400, or None. Checks the structure our clients
    must get right (roles, pairing of tool calls with results, required fields), not every field."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: must be a non-empty array"
    if kind == "openai":
        return _openai_tokens_problem(body) or _openai_problem(messages, body.get("tools"))
    if not headers.get("anthropic-version"):
        return "anthropic-version: header is required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: field required"
    return _anthropic_problem(messages, body.get("tools"))


def _openai_tokens_problem(body: dict[str, Any]) -> str | None:
    """OpenAI's reasoning and gpt-5 models refuse `max_tokens` (their documented 400, word for word)."""
    if "max_tokens" in body and body["model"].rsplit("/", 1)[-1].startswith(("gpt-5", "o1", "o3", "o4")):
        return ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.")
    return None


def _openai_problem(messages: list[Any], tools: Any) -> str | None:
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "user", "assistant", "tool", "developer"):
            return f"messages[{i}].role: invalid value {role!r}"
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return (f"messages[{i}]: messages with role 'tool' must be a response to a preceding message "
                        f"with 'tool_calls' (tool_call_id {m.get('tool_call_id')!r})")
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            return (f"messages[{i}]: an assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'; missing {sorted(pending)}")
        calls = (m.get("tool_calls") or []) if role == "assistant" else []
        for c in calls:
            fn = c.get("function") or {}
            if c.get("type") != "function" or not c.get("id") or not isinstance(fn.get("name"), str) \
                    or not isinstance(fn.get("arguments"), str):
                return (f"messages[{i}].tool_calls: each needs id, type 'function', function.name and "
                        "function.arguments (a string)")
        if not calls and not isinstance(m.get("content"), (str, list)):
            return f"messages[{i}].content: required"
        if isinstance(m.get("content"), list) and (problem := _openai_parts(i, role, m["content"])):
            return problem
        pending = {c["id"] for c in calls}
    if pending:
        return f"tool_calls without tool messages responding to them: {sorted(pending)}"
    for t in tools or []:
        fn = t.get("function") or {}
        if t.get("type") != "function" or not isinstance(fn.get("name"), str) \
                or not isinstance(fn.get("parameters"), dict):
            return "tools: each needs type 'function' and function.name, function.parameters"
    if tools == []:
        return "tools: [] is too short - omit the field instead"
    return None


def _base64_problem(data: Any) -> str | None:
    if not isinstance(data, str) or not data:
        return "must be a non-empty base64 string"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "is not valid base64"
    return None


def _openai_parts(i: int, role: str, parts: list[Any]) -> str | None:
    """Content parts of a user message: text, or image_url with a data URL (or an http(s) URL)."""
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind != "image_url":
            return f"messages[{i}].content[{j}].type: invalid value {kind!r}"
        if role != "user":
            return f"messages[{i}].content[{j}]: image content is only supported in user messages"
        url = (part.get("image_url") or {}).get("url")
        if not isinstance(url, str):
            return f"messages[{i}].content[{j}].image_url.url: required"
        if url.startswith(("http://", "https://")):
            continue
        m = DATA_URL.fullmatch(url)
        if m is None or m.group(1) not in IMAGE_TYPES:
            return f"messages[{i}].content[{j}]: invalid image URL; expected a data:image/...;base64, URL"
        if problem := _base64_problem(m.group(2)):
            return f"messages[{i}].content[{j}]: the image data {problem}"
    return None


def _anthropic_image(i: int, role: str, block: dict[str, Any]) -> str | None:
    source = block.get("source") or {}
    if role != "user":
        return f"messages.{i}: image blocks are only allowed in user messages"
    if source.get("type") != "base64" or source.get("media_type") not in IMAGE_TYPES:
        return f"messages.{i}.content: image source needs type 'base64' and a media_type of {', '.join(IMAGE_TYPES)}"
    if problem := _base64_problem(source.get("data")):
        return f"messages.{i}.content: image source data {problem}"
    return None


def _anthropic_problem(messages: list[Any], tools: Any) -> str | None:
    expected: set[str] = set()
    previous_role = None
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return "messages: first message must use the \"user\" role"
        if role == previous_role:
            return f"messages: roles must alternate between \"user\" and \"assistant\", found two \"{role}\" in a row"
        previous_role = role
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            return f"messages.{i}.content: must be a string or a non-empty array of blocks"
        kinds = [b.get("type") for b in blocks]
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if results and role != "user":
            return f"messages.{i}: tool_result blocks are only allowed in user messages"
        if role == "user" and expected - results:
            return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(sorted(expected - results))}")
        if results - expected:
            return (f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{', '.join(sorted(str(r) for r in results - expected))}")
        first_other = next((j for j, k in enumerate(kinds) if k != "tool_result"), len(kinds))
        if "tool_result" in kinds[first_other:]:
            return f"messages.{i}: tool_result blocks must come first in the content array"
        for b in blocks:
            if b.get("type") == "text" and not (isinstance(b.get("text"), str) and b["text"]):
                return f"messages.{i}: text content blocks must be non-empty"
            if b.get("type") == "tool_use" and (role != "assistant" or not isinstance(b.get("input"), dict)):
                return f"messages.{i}: tool_use blocks belong to assistant messages and need an object input"
            if b.get("type") == "image" and (problem := _anthropic_image(i, role, b)):
                return problem
        expected = {b.get("id") for b in blocks if b.get("type") == "tool_use"} if role == "assistant" else set()
    for t in tools or []:
        if not isinstance(t.get("name"), str) or not isinstance(t.get("input_schema"), dict):
            return "tools: each needs name and input_schema"
    return None
