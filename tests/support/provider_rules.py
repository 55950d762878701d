"""Model providers as they document themselves: the responses they send (whole and streamed) and the
rules they enforce on the next request, with their own status and error body.

Each shape is a rule for the fake model (`model.rules.append(shape)`) and the builder of its responses
(`model.script(shape.calls(("task_create", {...})), shape.reply("Done."))`). A shape remembers what it
handed out (thought signatures, reasoning, thinking blocks) and refuses a request that does not carry it
back where the provider requires it:

- `Gemini`: Gemini 3 on its OpenAI-compatible endpoint (ai.google.dev, "Thought signatures"). Each tool
  call step returns `extra_content.google.thought_signature` on its first call; a request whose current
  turn (after the last user message) lacks one answers 400 with Gemini's error *list*. Streamed tool
  calls come whole, one per chunk, without `index`.
- `DeepSeek`: thinking mode (api-docs.deepseek.com, "Thinking mode"): `reasoning_content` beside the
  content; every assistant message between two user messages that called tools must carry it back, else
  400 "Missing `reasoning_content` field in the assistant message at message index N".
- `AnthropicThinking`: extended thinking (docs.claude.com, "Extended thinking"): `thinking` and
  `redacted_thinking` blocks with signatures; while a tool loop runs the last assistant message must
  start with one, and each one sent must be unchanged; `budget_tokens` at least 1024 and below
  `max_tokens`; no field the API does not know.
- `OpenAIStrict`: api.openai.com: no message or tool-call field it does not document, `reasoning_effort`
  only on reasoning models and only with a documented value; `refusal` for a refused request.
- `ThinkInContent`: llama.cpp `--reasoning-format none`, vLLM without a reasoning parser, some Ollama
  models: a `<think>…</think>` block at the head of the content, the tags split across chunks.
- `Refuses`: a model that refuses whenever the trigger is anywhere in the conversation it is sent (so a
  refused exchange kept in the history makes every later turn refused too), in OpenAI's shape (the
  `refusal` field, `delta.refusal`) or Anthropic's (`stop_reason: "refusal"` after some text).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from tests.support.model_wire import Kind, Raw, Status, Step

_ids = itertools.count(1)


def _pieces(text: str, size: int = 5) -> list[str]:
    """`text` in small pieces, so tags and words are split across chunks as a real stream splits them."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def _last_user(messages: list[dict[str, Any]], kind: Kind) -> int:
    """The index of the last message a person (not a tool result) wrote; -1 when none."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if kind == "openai" or isinstance(content, str) or any(b.get("type") != "tool_result" for b in content):
            return i
    return -1


# -- the OpenAI chat-completions wire ---------------------------------------------------------------


def openai_raw(model: str, message: dict[str, Any], deltas: list[dict[str, Any]], finish: str,
               usage: tuple[int, int] = (20, 10)) -> Raw:
    """A chat completion: `message` whole, or `deltas` streamed, then the finish, usage and [DONE]."""
    n = next(_ids)
    base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": model}
    used = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    body = {**base, "object": "chat.completion", "usage": used,
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "object": "chat.completion.chunk",
                      "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    events: list[tuple[str | None, Any] | bytes] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk(d) for d in deltas]
    events += [chunk({}, finish), (None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": used}),
               (None, "[DONE]")]
    return Raw(body, tuple(events))


def openai_error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> Status:
    """OpenAI's error body (also DeepSeek's and llama.cpp's)."""
    return Status(status, body={"error": {"message": message, "type": kind, "param": param, "code": None}})


def _function(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(args)}


class Gemini:
    """Gemini 3 on https://generativelanguage.googleapis.com/v1beta/openai/."""

    model = "gemini-3-pro-preview"

    def __init__(self) -> None:
        self.issued: dict[str, str] = {}  # call id -> the signature handed out with it

    def calls(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> Raw:
        """One step of parallel calls; only the first carries the step's signature, as documented."""
        wired: list[dict[str, Any]] = []
        for i, (name, args) in enumerate(calls):
            call: dict[str, Any] = {"id": f"function-call-{next(_ids)}", "type": "function",
                                    "function": _function(name, args)}
            if i == 0:
                signature = f"CqQBAdHtim{next(_ids):06d}sig=="
                call["extra_content"] = {"google": {"thought_signature": signature}}
                self.issued[call["id"]] = signature
            wired.append(call)
        message = {"content": text or None, "tool_calls": wired}
        # Streamed: each call whole in its own chunk, without `index`.
        deltas = ([{"content": text}] if text else []) + [{"tool_calls": [c]} for c in wired]
        return openai_raw(self.model, message, deltas, "tool_calls")

    def reply(self, text: str) -> Raw:
        return openai_raw(self.model, {"content": text}, [{"content": p} for p in _pieces(text)], "stop")

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        messages = body.get("messages") or []
        for i in range(_last_user(messages, "openai") + 1, len(messages)):
            calls = messages[i].get("tool_calls") or [] if messages[i].get("role") == "assistant" else []
            for position, call in enumerate(calls):
                sent = ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
                issued = self.issued.get(call.get("id"))
                if issued is not None and sent is None:
                    return self.error(
                        "Function call is missing a thought_signature in functionCall parts. This is required for "
                        "tools to work correctly, and missing thought_signature may lead to degraded model "
                        f"performance. Additional data, function call `default_api:{call['function']['name']}` , "
                        f"position {position + 1}. Please refer to https://ai.google.dev/gemini-api/docs/"
                        "thought-signatures for more details.")
                if sent is not None and sent != issued:
                    return self.error("Corrupted thought signature.")
        return None

    @staticmethod
    def error(message: str, code: int = 400, status: str = "INVALID_ARGUMENT") -> Status:
        """Gemini's OpenAI-compatible endpoint answers errors as a JSON list."""
        return Status(code, body=[{"error": {"code": code, "message": message, "status": status}}])


class DeepSeek:
    """DeepSeek's thinking mode on https://api.deepseek.com."""

    model = "deepseek-reasoner"

    def __init__(self) -> None:
        self.issued: set[str] = set()

    def _reasoning(self, reasoning: str) -> list[dict[str, Any]]:
        self.issued.add(reasoning)
        return [{"content": None, "reasoning_content": p} for p in _pieces(reasoning, 7)]

    def calls(self, *calls: tuple[str, dict[str, Any]], reasoning: str = "The owner wants a task; call it.") -> Raw:
        wired = [{"id": f"call_{next(_ids)}", "type": "function", "function": _function(n, a)} for n, a in calls]
        deltas = self._reasoning(reasoning) + [
            {"content": None, "reasoning_content": None,
             "tool_calls": [{"index": i, **c, "function": {**c["function"], "arguments": ""}}]} for i, c in
            enumerate(wired)] + [{"tool_calls": [{"index": i, "function": {"arguments": c["function"]["arguments"]}}]}
                                 for i, c in enumerate(wired)]
        return openai_raw(self.model, {"content": "", "reasoning_content": reasoning, "tool_calls": wired}, deltas,
                          "tool_calls")

    def reply(self, text: str, reasoning: str = "Done; say so briefly.") -> Raw:
        deltas = self._reasoning(reasoning) + [{"content": p, "reasoning_content": None} for p in _pieces(text)]
        return openai_raw(self.model, {"content": text, "reasoning_content": reasoning}, deltas, "stop")

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        if (body.get("thinking") or {}).get("type") == "disabled":
            return None
        messages = body.get("messages") or []
        span: list[int] = []  # the assistant messages since the last user message
        for i, m in enumerate([*messages, {"role": "user"}]):
            if m.get("role") == "user":
                if any(messages[j].get("tool_calls") for j in span):
                    for j in span:
                        if "reasoning_content" not in messages[j]:
                            return openai_error(400, f"Missing `reasoning_content` field in the assistant message "
                                                f"at message index {j}. For more information, please refer to "
                                                "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls")
                        if messages[j]["reasoning_content"] not in self.issued:
                            return openai_error(400, f"messages[{j}].reasoning_content does not match")
                span = []
            elif m.get("role") == "assistant":
                span.append(i)
        return None


_OPENAI_MESSAGE_FIELDS = {
    "system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"}, "tool": {"role", "content", "tool_call_id"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio"},
}
_EFFORTS = ("minimal", "low", "medium", "high")


class OpenAIStrict:
    """api.openai.com: rejects what it does not document."""

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        for i, m in enumerate(body.get("messages") or []):
            unknown = set(m) - _OPENAI_MESSAGE_FIELDS.get(m.get("role"), set())
            for call in m.get("tool_calls") or []:
                unknown |= set(call) - {"id", "type", "function"}
            if unknown:
                return openai_error(400, f"Additional properties are not allowed ('{sorted(unknown)[0]}' was "
                                    f"unexpected) - 'messages.{i}'")
        effort = body.get("reasoning_effort")
        if effort is not None:
            if not body["model"].startswith(("o1", "o3", "o4", "gpt-5")):
                return openai_error(400, "Unsupported parameter: 'reasoning_effort' is not supported with this "
                                    "model.", "invalid_request_error", "reasoning_effort")
            if effort not in _EFFORTS:
                return openai_error(400, f"Invalid value: '{effort}'. Supported values are: 'minimal', 'low', "
                                    "'medium', and 'high'.", "invalid_request_error", "reasoning_effort")
        return None


class ThinkInContent:
    """A local server that leaves the reasoning in the content: llama.cpp `--reasoning-format none`, vLLM
    without `--reasoning-parser`, Ollama models whose template does not separate it."""

    model = "qwen3-8b"

    def reply(self, text: str, thinking: str = "Okay, the user wants an answer. Let me think.") -> Raw:
        content = f"<think>\n{thinking}\n</think>\n\n{text}"
        return openai_raw(self.model, {"content": content}, [{"content": p} for p in _pieces(content, 3)], "stop")

    def calls(self, *calls: tuple[str, dict[str, Any]], thinking: str = "A tool does this.") -> Raw:
        content = f"<think>{thinking}</think>"
        wired = [{"id": f"call_{next(_ids)}", "type": "function", "function": _function(n, a)} for n, a in calls]
        deltas = [{"content": p} for p in _pieces(content, 3)] + [{"tool_calls": [{"index": i, **c}]}
                                                                   for i, c in enumerate(wired)]
        return openai_raw(self.model, {"content": content, "tool_calls": wired}, deltas, "tool_calls")

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        """These servers require nothing back beyond the wire format the fake always checks."""
        return None


class ReasoningField:
    """A server that returns the reasoning in a field of its own, beside the content: `reasoning` for
    OpenRouter and Ollama, `reasoning_content` for vLLM with a reasoning parser and llama.cpp's default;
    none at all (`field` None) for a plain model. OpenRouter also sends `: OPENROUTER PROCESSING` comment
    lines while it waits (`comments`)."""

    def __init__(self, model: str, field: str | None, comments: bool = False) -> None:
        self.model, self.field, self.comments = model, field, comments

    def _raw(self, message: dict[str, Any], deltas: list[dict[str, Any]], finish: str, reasoning: str) -> Raw:
        if self.field is not None:
            message = {**message, self.field: reasoning}
            deltas = [{self.field: p} for p in _pieces(reasoning, 6)] + deltas
        raw = openai_raw(self.model, message, deltas, finish)
        if not self.comments:
            return raw
        return Raw(raw.body, (b": OPENROUTER PROCESSING\n\n", *raw.events[:1], b": OPENROUTER PROCESSING\n\n",
                              *raw.events[1:]))

    def calls(self, *calls: tuple[str, dict[str, Any]], reasoning: str = "Use the tool.") -> Raw:
        wired = [{"id": f"call_{next(_ids)}", "type": "function", "function": _function(n, a)} for n, a in calls]
        return self._raw({"content": None, "tool_calls": wired},
                         [{"tool_calls": [{"index": i, **c}]} for i, c in enumerate(wired)], "tool_calls", reasoning)

    def reply(self, text: str, reasoning: str = "Answer briefly.") -> Raw:
        return self._raw({"content": text}, [{"content": p} for p in _pieces(text)], "stop", reasoning)

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        effort = (body.get("reasoning") or {}).get("effort", "high")
        if effort not in _EFFORTS:
            return openai_error(400, f"reasoning.effort: invalid value {effort!r}")
        return None


# -- the Anthropic Messages API -----------------------------------------------------------------------


def anthropic_raw(model: str, content: list[dict[str, Any]], stop_reason: str) -> Raw:
    """A Messages API response: `content` whole, or streamed block by block as the API streams it."""
    n = next(_ids)
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
            events += [delta(index, {"type": "thinking_delta", "thinking": p}) for p in _pieces(block["thinking"], 9)]
            events.append(delta(index, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "text":
            events += [delta(index, {"type": "text_delta", "text": p}) for p in _pieces(block["text"])]
        elif kind == "tool_use":
            events += [delta(index, {"type": "input_json_delta", "partial_json": p})
                       for p in _pieces(json.dumps(block["input"]), 4)]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return Raw(body, tuple(events))


def anthropic_error(status: int, message: str, kind: str = "invalid_request_error") -> Status:
    return Status(status, body={"type": "error", "error": {"type": kind, "message": message}})


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
        blocks = [{"type": "thinking", "thinking": thought, "signature": f"EqQBCgIYAh{next(_ids):06d}signature=="}]
        if self.redacted:
            blocks.append({"type": "redacted_thinking", "data": f"EmwKAhgBEgy3va{next(_ids):06d}redacted"})
        self.issued += blocks
        return blocks

    def calls(self, *calls: tuple[str, dict[str, Any]], thought: str = "The owner wants a task made; use the tool.",
              text: str = "") -> Raw:
        content = self._thinking(thought) + ([{"type": "text", "text": text}] if text else [])
        content += [{"type": "tool_use", "id": f"toolu_{next(_ids):06d}", "name": n, "input": a} for n, a in calls]
        return anthropic_raw(self.model, content, "tool_use")

    def reply(self, text: str, thought: str = "It is done; tell the owner.") -> Raw:
        return anthropic_raw(self.model, [*self._thinking(thought), {"type": "text", "text": text}], "end_turn")

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        messages = body.get("messages") or []
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


# -- refusals -----------------------------------------------------------------------------------------


class Refuses:
    """A model that refuses every request whose conversation holds `trigger` (in a user message)."""

    def __init__(self, trigger: str, partial: str = "I can help with part of that. Actually,") -> None:
        self.trigger = trigger
        self.partial = partial
        self.refusals = 0

    def __call__(self, kind: Kind, body: dict[str, Any]) -> Step | None:
        if not any(self.trigger in _text_of(m) for m in body.get("messages") or [] if m.get("role") == "user"):
            return None
        self.refusals += 1
        if kind == "anthropic":
            # The reply breaks off where the classifier stepped in; the partial text comes first.
            return anthropic_raw(body["model"], [{"type": "text", "text": self.partial}], "refusal")
        refusal = "I'm sorry, but I can't help with that request."
        return openai_raw(body["model"], {"content": None, "refusal": refusal},
                          [{"content": None, "refusal": p} for p in _pieces(refusal, 8)], "stop")
