"""The message in a provider's error body, in each documented shape.

    OpenAI, llama.cpp, DeepSeek   {"error": {"message": ..., "type": ..., "code": ...}}
    Anthropic                     {"type": "error", "error": {"type": ..., "message": ...}}
    Gemini (OpenAI-compatible)    [{"error": {"code": 400, "message": ..., "status": ...}}]  (a list)
    Gemini (native), Vertex       {"error": {"code": 400, "message": ..., "status": ...}}
    OpenRouter                    {"error": {"code": ..., "message": ...,
                                             "metadata": {"raw": ..., "provider_name": ...}}}
    Ollama                        {"error": "model 'x' not found"}
    vLLM                          {"object": "error", "message": ..., "type": ..., "code": ...}

What is read is the provider's own words: the caller shows them marked as such, after removing the key
and the base URL, which a provider may echo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

MAX_CHARS = 300


def provider_words(body: bytes, hidden: Iterable[str] = ()) -> str:
    """The error message in `body` ("" when it holds none), each of `hidden` replaced by "***", cut to
    MAX_CHARS. A body that is not JSON is taken as the message itself (a proxy's plain-text error)."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        message = _message(json.loads(text))
    except ValueError:
        message = text
    for secret in hidden:
        if secret:
            message = message.replace(secret, "***")
    message = " ".join(message.split())
    return message if len(message) <= MAX_CHARS else message[:MAX_CHARS - 1] + "…"


def _message(data: Any) -> str:
    if isinstance(data, list):  # Gemini's OpenAI-compatible endpoint: a list of error objects
        return "; ".join(filter(None, (_message(item) for item in data[:3])))
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    if isinstance(error, str):  # Ollama
        return error
    if isinstance(error, dict):
        message = _text(error.get("message"))
        metadata = error.get("metadata")
        if isinstance(metadata, dict) and metadata.get("raw"):  # OpenRouter: the upstream provider's words
            raw = metadata["raw"]
            upstream = _upstream(raw)
            who = _text(metadata.get("provider_name"))
            if upstream and upstream != message:
                message = f"{message} ({who + ': ' if who else ''}{upstream})"
        return message or _text(error.get("status")) or _text(error.get("type"))
    if data.get("object") == "error" or "message" in data:  # vLLM
        return _text(data.get("message"))
    return _text(data.get("detail"))  # FastAPI-style servers and proxies


def _upstream(raw: Any) -> str:
    """OpenRouter's `metadata.raw`: the upstream body, as JSON text, an object, or plain text."""
    if isinstance(raw, str):
        try:
            return _message(json.loads(raw)) or raw
        except ValueError:
            return raw
    return _message(raw)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


class ErrorEvent(Exception):
    """An error the provider sent inside a stream (an `error` event, or a chunk with an `error` field).
    `body` is the event's data: the client reads it with `provider_words`, as it reads an error answer's
    body, so it reaches the owner the same way (marked as the provider's, cut, no key or base URL)."""

    def __init__(self, body: str) -> None:
        super().__init__("the provider sent an error in the stream")
        self.body = body
