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
- `AnthropicThinking` (tests/support/anthropic_rules.py): Anthropic's extended thinking.
- `OpenAIStrict`: api.openai.com: no message or tool-call field it does not document, `reasoning_effort`
  only on reasoning models and only with a documented value; `refusal` for a refused request.
- `ThinkInContent`: llama.cpp `--reasoning-format none`, vLLM without a reasoning parser, some Ollama
  models: a `<think>…</think>` block at the head of the content, the tags split across chunks; with
  `opened_in_prompt`, only its closing tag (DeepSeek-R1 distills, QwQ, Qwen3 whose chat template opens
  `<think>` at the end of the prompt): `reasoning…</think>answer`.
- `Refuses`: a model that refuses whenever the trigger is anywhere in the conversation it is sent (so a
  refused exchange kept in the history makes every later turn refused too), in OpenAI's shape (the
  `refusal` field, `delta.refusal`) or Anthropic's (`stop_reason: "refusal"` after some text).
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.support.anthropic_rules import anthropic_raw
from tests.support.anthropic_rules import ids as _ids
from tests.support.anthropic_rules import pieces as _pieces
from tests.support.model_wire import Kind, Raw, Status, Step


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
    without `--reasoning-parser`, Ollama models whose template does not separate it. `opened_in_prompt`:
    the template opened the block, so the content carries only its end."""

    model = "qwen3-8b"

    def __init__(self, opened_in_prompt: bool = False) -> None:
        self.opening = "" if opened_in_prompt else "<think>"

    def reply(self, text: str, thinking: str = "Okay, the user wants an answer. Let me think.") -> Raw:
        content = f"{self.opening}\n{thinking}\n</think>\n\n{text}"
        return openai_raw(self.model, {"content": content}, [{"content": p} for p in _pieces(content, 3)], "stop")

    def calls(self, *calls: tuple[str, dict[str, Any]], thinking: str = "A tool does this.") -> Raw:
        content = f"{self.opening}{thinking}</think>"
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
