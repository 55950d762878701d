"""Every config block of docs/models.md, read from the page itself, runs a tool turn and a follow-up turn
against the local server of its provider's shape (tests/support/provider_rules.py), streamed and not:
the page and the code cannot drift apart."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.llm import ChatMessage, ModelReply, ToolSchema, make_client
from gateway.llm.http import HttpModelClient
from gateway.turns.history import to_chat
from store.records import MessageRecord
from tests.fixtures.model import FakeModel
from tests.support.anthropic_rules import AnthropicThinking
from tests.support.provider_rules import (
    DeepSeek,
    Gemini,
    OpenAIStrict,
    ReasoningField,
    ThinkInContent,
)

PAGE = Path(__file__).resolve().parent.parent / "docs" / "models.md"
TOOL = ToolSchema(name="task_create", description="Create a task.",
                  parameters={"type": "object", "properties": {"title": {"type": "string"}}})
SECRET = "SECRET"


def blocks() -> dict[str, str]:
    """Each `## Heading` of the page and the TOML block under it."""
    found = re.findall(r"^## (.+?)\n.*?```toml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    return dict(found)


def shape_for(heading: str, model: str) -> tuple[Any, list[Any], dict[str, Any]]:
    """The local server shape standing in for the provider, its rules, and how to hand it a secret."""
    if heading == "OpenAI":
        return ReasoningField(model, None), [OpenAIStrict()], {}
    if heading == "Anthropic":
        shape = AnthropicThinking()
        return shape, [shape], {"thought": SECRET}
    if heading == "Gemini":
        shape = Gemini()
        return shape, [shape], {}
    if heading == "DeepSeek":
        shape = DeepSeek()
        return shape, [shape], {"reasoning": SECRET}
    if heading in ("OpenRouter", "Ollama"):
        shape = ReasoningField(model, "reasoning", comments=heading == "OpenRouter")
        return shape, [shape], {"reasoning": SECRET}
    if heading == "vLLM":
        shape = ReasoningField(model, "reasoning_content")
        return shape, [shape], {"reasoning": SECRET}
    if heading == "llama.cpp":
        return ThinkInContent(), [], {"thinking": SECRET}
    raise AssertionError(f"docs/models.md has a block for {heading!r} that no test exercises")


def test_the_page_has_a_block_for_every_provider_the_issue_names() -> None:
    assert sorted(blocks()) == sorted(["OpenAI", "Anthropic", "Gemini", "DeepSeek", "OpenRouter", "Ollama", "vLLM",
                                       "llama.cpp"])


def stored(reply: ModelReply) -> ChatMessage:
    row = MessageRecord(session_id="s", turn_id="t", role="assistant", content=reply.text, tool_calls=reply.tool_calls,
                        meta={"usage": reply.usage.model_dump(), "model": reply.model, **reply.stored()})
    return to_chat(MessageRecord.model_validate_json(row.model_dump_json()))


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("heading", sorted(blocks()))
async def test_each_documented_block_runs_a_tool_turn_and_a_follow_up(model: FakeModel, heading: str,
                                                                      streamed: bool) -> None:
    block = blocks()[heading]
    documented = parse_config(tomllib.loads(block)).model
    url = model.url_anthropic if documented.provider == "anthropic" else model.url_openai
    local = parse_config(tomllib.loads(re.sub(r'base_url = "[^"]*"', f'base_url = "{url}"', block))).model
    shape, rules, secret = shape_for(heading, documented.model)
    model.rules += rules
    model.script(shape.calls(("task_create", {"title": "milk"}), **secret), shape.reply("Added milk.", **secret),
                 shape.reply("Glad to help.", **secret))
    shown: list[str] = []

    async def show(piece: str) -> None:
        shown.append(piece)

    on_text = show if streamed else None
    async with make_client(local, "sk-doc-key") as client:
        convo = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="add milk")]
        first = await client.complete(convo, [TOOL], on_text)
        assert [c.name for c in first.tool_calls] == ["task_create"]
        convo += [stored(first), ChatMessage(role="tool", content="done", tool_call_id=first.tool_calls[0].id)]
        second = await client.complete(convo, [TOOL], on_text)
        convo += [stored(second), ChatMessage(role="user", content="thanks")]
        third = await client.complete(convo, [TOOL], on_text)
    assert (second.text, third.text) == ("Added milk.", "Glad to help.")
    assert SECRET not in "".join(shown) + first.text + second.text + third.text
    assert len(model.requests) == 3
    # The documented thinking settings go out as the provider documents them (checked on the body a client
    # for the real base URL builds: OpenRouter's field depends on its host).
    async with make_client(documented, "sk-doc-key") as real:
        assert isinstance(real, HttpModelClient)
        body = real.request_body(convo, [TOOL], documented.model)
    if documented.thinking is not None:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": documented.thinking.budget_tokens}
        assert model.requests[0].body["thinking"] == body["thinking"]
    if documented.reasoning_effort:
        field = "reasoning" if "openrouter.ai" in documented.base_url else "reasoning_effort"
        want = {"effort": documented.reasoning_effort} if field == "reasoning" else documented.reasoning_effort
        assert body[field] == want
