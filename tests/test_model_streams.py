"""What a streamed answer may keep and say (issues 38, 39): its text, reasoning and tool input add up to at
most the bound of a whole answer (16 MB), however small its pieces, and an error the provider sends inside
the stream reaches the owner as an error body does: marked as the provider's words, cut, no key."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.llm import AnthropicClient, ModelUnavailable, OpenAIClient
from gateway.llm.errors import MAX_CHARS
from gateway.llm.types import ChatMessage, ModelCutOff
from tests.fixtures.model import FakeModel, Raw

KEY = "sk-stream-secret-1"
PIECE = 1000  # characters per delta: small against the bound, so the stream is many thousands of events
PIECES = 17 * 1024  # 17 M characters in all, past the 16 MB bound


def client(fake: FakeModel, provider: str) -> OpenAIClient | AnthropicClient:
    if provider == "anthropic":
        return AnthropicClient(fake.url_anthropic, KEY, "claude", 5, 2, 4096, backoff_base_s=0.001)
    return OpenAIClient(fake.url_openai, KEY, "m", 5, 2, 4096, backoff_base_s=0.001)


def sse(event: str | None, data: Any) -> bytes:
    return ((f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n").encode()


def openai_chunk(delta: dict[str, Any]) -> bytes:
    return sse(None, {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})


def anthropic_start(index: int, block: dict[str, Any]) -> bytes:
    return sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def anthropic_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


MESSAGE_START = sse("message_start", {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [], "stop_reason": None,
    "usage": {"input_tokens": 5, "output_tokens": 1}}})
X = "x" * PIECE

# provider, what grows: the opening events, then one delta event repeated PIECES times (one bytes blob)
FLOODS: dict[str, tuple[str, bytes, bytes]] = {
    "openai tool arguments": ("openai", openai_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                      "function": {"name": "t", "arguments": ""}}]}),
                              openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": X}}]})),
    "deepseek reasoning": ("openai", b"", openai_chunk({"reasoning_content": X})),
    "openai text": ("openai", b"", openai_chunk({"content": X})),
    "anthropic tool input": ("anthropic", MESSAGE_START + anthropic_start(0, {"type": "tool_use", "id": "toolu_1",
                                                                             "name": "t", "input": {}}),
                             anthropic_delta(0, {"type": "input_json_delta", "partial_json": X})),
    "anthropic thinking": ("anthropic", MESSAGE_START + anthropic_start(0, {"type": "thinking", "thinking": ""}),
                           anthropic_delta(0, {"type": "thinking_delta", "thinking": X})),
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
async def test_a_streamed_answer_past_the_bound_is_refused(model: FakeModel, flood: str) -> None:
    provider, opening, delta = FLOODS[flood]
    model.script(Raw(body={}, events=(opening + delta * PIECES,)))
    async with client(model, provider) as c:
        with pytest.raises(ModelUnavailable, match="streamed an answer larger than 16 MB") as caught:
            await c.complete([ChatMessage(role="user", content="hi")], [], on_text=lambda _: asyncio.sleep(0))
    # Text already handed out ends as a cut-off reply; otherwise the answer is refused. Neither is retried.
    assert isinstance(caught.value, ModelCutOff) == (flood == "openai text")
    assert "docs/limits.md" in str(caught.value) or flood == "openai text"
    assert len(model.requests) == 1


SAID = f"upstream rejected key {KEY} at {{url}}: " + "the rest of a long provider message " * 20

ERRORS: dict[str, tuple[bytes, ...]] = {
    "openai": (openai_chunk({"role": "assistant", "content": ""}), sse(None, {"error": {"message": SAID}})),
    "anthropic": (MESSAGE_START, sse("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                        "message": SAID}})),
}


@pytest.mark.parametrize("provider", sorted(ERRORS))
async def test_an_error_inside_the_stream_is_shown_as_the_providers_words(model: FakeModel, provider: str) -> None:
    url = model.url_anthropic if provider == "anthropic" else model.url_openai
    events = tuple(e.replace(b"{url}", url.encode()) for e in ERRORS[provider])
    model.script(*[Raw(body={}, events=events)] * 3)
    async with client(model, provider) as c:
        with pytest.raises(ModelUnavailable) as caught:
            await c.complete([ChatMessage(role="user", content="hi")], [], on_text=lambda _: asyncio.sleep(0))
    said = str(caught.value)
    assert 'an error in the stream; the provider says: "upstream rejected key *** at ***: the rest' in said, said
    words = said.split('the provider says: "', 1)[1].split('"', 1)[0]
    assert KEY not in said and url not in words  # the URL is named once, as ours ("the model at ...")
    assert len(words) == MAX_CHARS and words.endswith("…")
    assert len(model.requests) == 3  # an error in the stream is worth a retry, as a 5xx is
