"""Issue 38: each provider's documented contract, held by a local server that enforces it
(tests/support/provider_rules.py): what it returns is read, what it requires back is sent back (from
the stored message, through the store's own row conversion), and nothing of it reaches the owner."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.llm import AnthropicClient, ChatMessage, ModelReply, ModelUnavailable, OpenAIClient, ToolSchema
from gateway.llm.errors import provider_words
from gateway.llm.http import HttpModelClient
from gateway.llm.think import ONLY_THINKING, ThinkFilter, strip_think
from gateway.llm.types import Restart
from gateway.turns.history import to_chat
from store.records import MessageRecord
from tests.fixtures.model import FakeModel, Status, start_fake_model
from tests.support.anthropic_rules import AnthropicThinking, anthropic_raw
from tests.support.provider_rules import (
    DeepSeek,
    Gemini,
    OpenAIStrict,
    Refuses,
    ThinkInContent,
    openai_raw,
)

KEY = "sk-secret-38"
TOOL = ToolSchema(name="task_create", description="Create a task.",
                  parameters={"type": "object", "properties": {"title": {"type": "string"}}})


@pytest.fixture(params=[False, True], ids=["whole", "streamed"])
def streamed(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def openai(fake: FakeModel, model: str = "m", **kw: Any) -> OpenAIClient:
    return OpenAIClient(fake.url_openai, KEY, model, 5, 0, 4096, api_key_env="K", **kw)


def anthropic(fake: FakeModel, **kw: Any) -> AnthropicClient:
    return AnthropicClient(fake.url_anthropic, KEY, "claude-sonnet-4-5", 5, 0, 4096, api_key_env="K", **kw)


class Shown:
    """What a streamed reply hands the owner, piece by piece; a `Restart` withdraws what came before it,
    as a live message is edited (`withdrawn` keeps it)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.withdrawn: list[str] = []

    async def __call__(self, piece: str) -> None:
        if isinstance(piece, Restart):
            self.withdrawn.append("".join(self.pieces))
            self.pieces = []
        self.pieces.append(piece)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


async def ask(client: HttpModelClient, convo: list[ChatMessage], streamed: bool,
              shown: Shown | None = None) -> ModelReply:
    return await client.complete(convo, [TOOL], on_text=(shown or Shown()) if streamed else None)


def stored(reply: ModelReply) -> ChatMessage:
    """The reply as the runtime stores it and reads it back for the next request (JSON in the row)."""
    row = MessageRecord(session_id="s", turn_id="t", role="assistant", content=reply.text, tool_calls=reply.tool_calls,
                        meta={"usage": reply.usage.model_dump(), "model": reply.model, **reply.stored()})
    return to_chat(MessageRecord.model_validate_json(row.model_dump_json()))


def results(reply: ModelReply) -> list[ChatMessage]:
    return [ChatMessage(role="tool", content="done", tool_call_id=c.id, name=c.name) for c in reply.tool_calls]


def start(text: str = "add milk and bread") -> list[ChatMessage]:
    return [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)]


# -- 1, 2: Gemini ---------------------------------------------------------------------------------------


async def test_gemini_signatures_go_back_on_their_calls_and_indexless_calls_stay_apart(
        model: FakeModel, streamed: bool) -> None:
    gemini = Gemini()
    model.rules.append(gemini)
    model.script(gemini.calls(("task_create", {"title": "milk"}), ("task_create", {"title": "bread"})),
                 gemini.reply("Added both."))
    async with openai(model, gemini.model) as c:
        first = await ask(c, convo := start(), streamed)
        assert [(t.name, json.loads(t.arguments)) for t in first.tool_calls] == [
            ("task_create", {"title": "milk"}), ("task_create", {"title": "bread"})]  # two calls, not one glued
        convo += [stored(first), *results(first)]
        second = await ask(c, convo, streamed)
    assert second.text == "Added both."
    sent_calls = model.requests[1].messages[2]["tool_calls"]
    signature = gemini.issued[first.tool_calls[0].id]
    assert sent_calls[0]["extra_content"] == {"google": {"thought_signature": signature}}  # unchanged
    assert "extra_content" not in sent_calls[1]  # only the first call of a step carries one
    assert len(model.requests) == 2


async def test_gemini_refuses_a_tool_turn_without_its_signature_in_its_own_words(model: FakeModel) -> None:
    """The rule itself: a call sent back bare gets Gemini's 400, an error list, shown as Gemini's words."""
    gemini = Gemini()
    model.rules.append(gemini)
    model.script(gemini.calls(("task_create", {"title": "milk"})))
    async with openai(model, gemini.model) as c:
        first = await c.complete(start(), [TOOL])
        bare = ChatMessage(role="assistant", tool_calls=first.tool_calls)  # what the client used to send
        with pytest.raises(ModelUnavailable) as err:
            await c.complete([*start(), bare, *results(first)], [TOOL])
    text = str(err.value)
    assert 'HTTP 400 Bad Request; the provider says: "Function call is missing a thought_signature' in text
    assert KEY not in text


# -- 3: DeepSeek ----------------------------------------------------------------------------------------


async def test_deepseek_reasoning_goes_back_on_tool_turns_and_is_never_shown(model: FakeModel, streamed: bool) -> None:
    deepseek = DeepSeek()
    model.rules.append(deepseek)
    model.script(deepseek.calls(("task_create", {"title": "milk"}), reasoning="SECRET-REASONING-1"),
                 deepseek.reply("Added milk.", reasoning="SECRET-REASONING-2"),
                 deepseek.reply("You're welcome.", reasoning="SECRET-REASONING-3"))
    shown = Shown()
    async with openai(model, deepseek.model) as c:
        first = await ask(c, convo := start(), streamed, shown)
        convo += [stored(first), *results(first)]
        second = await ask(c, convo, streamed, shown)
        convo += [stored(second), ChatMessage(role="user", content="thanks")]
        third = await ask(c, convo, streamed, shown)
    assert (second.text, third.text) == ("Added milk.", "You're welcome.")
    assert "SECRET" not in shown.text + second.text + third.text
    assert "SECRET" not in stored(third).content
    sent = model.requests[2].messages  # the follow-up turn: the tool turn's reasoning goes back, both messages
    assert sent[2]["reasoning_content"] == "SECRET-REASONING-1" and sent[4]["reasoning_content"] == "SECRET-REASONING-2"
    assert third.extras is None  # a turn without tool calls: DeepSeek ignores it, so it is not kept


async def test_deepseek_refuses_a_tool_turn_without_reasoning(model: FakeModel) -> None:
    deepseek = DeepSeek()
    model.rules.append(deepseek)
    model.script(deepseek.calls(("task_create", {"title": "milk"})))
    async with openai(model, deepseek.model) as c:
        first = await c.complete(start(), [TOOL])
        bare = ChatMessage(role="assistant", tool_calls=first.tool_calls)
        with pytest.raises(ModelUnavailable, match="Missing `reasoning_content` field in the assistant message at "
                                                   "message index 2"):
            await c.complete([*start(), bare, *results(first)], [TOOL])


# -- 4: Anthropic extended thinking ---------------------------------------------------------------------


async def test_anthropic_thinking_blocks_go_back_verbatim_before_the_tool_use(model: FakeModel, streamed: bool) -> None:
    claude = AnthropicThinking(redacted=True)
    model.rules.append(claude)
    model.script(claude.calls(("task_create", {"title": "milk"}), thought="SECRET-THOUGHT", text="On it."),
                 claude.reply("Added milk.", thought="SECRET-THOUGHT-2"), claude.reply("Bye."))
    shown = Shown()
    async with anthropic(model, thinking_budget=2048) as c:
        first = await ask(c, convo := start(), streamed, shown)
        convo += [stored(first), *results(first)]
        second = await ask(c, convo, streamed, shown)
        convo += [stored(second), ChatMessage(role="user", content="thanks")]
        third = await ask(c, convo, streamed, shown)
    assert third.text == "Bye." and "SECRET" not in shown.text + first.text + second.text
    body = model.requests[1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    sent = body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert sent[:2] == claude.issued[:2]  # verbatim, signature and redacted data included


async def test_anthropic_refuses_a_tool_loop_whose_thinking_was_dropped(model: FakeModel) -> None:
    claude = AnthropicThinking()
    model.rules.append(claude)
    model.script(claude.calls(("task_create", {"title": "milk"})))
    async with anthropic(model, thinking_budget=2048) as c:
        first = await c.complete(start(), [TOOL])
        bare = ChatMessage(role="assistant", tool_calls=first.tool_calls)
        with pytest.raises(ModelUnavailable, match="Expected `thinking` or `redacted_thinking`, but found `tool_use`"):
            await c.complete([*start(), bare, *results(first)], [TOOL])


async def test_extras_go_back_only_to_the_provider_that_gave_them(model: FakeModel) -> None:
    """A conversation that began on Gemini and DeepSeek continues on OpenAI and on Claude at another
    server: neither provider's signatures or reasoning are sent there (both refuse fields they do not
    know), while each provider still gets its own back."""
    gemini, deepseek = Gemini(), DeepSeek()
    model.rules.append(gemini)
    model.script(gemini.calls(("task_create", {"title": "milk"})), deepseek.calls(("task_create", {"title": "x"})),
                 gemini.reply("ok"))
    async with openai(model, gemini.model) as c:
        g = await c.complete(start(), [TOOL])
    localhost = f"http://localhost:{model.port}/v1"  # the same fake, another base URL: another provider
    async with OpenAIClient(localhost, KEY, deepseek.model, 5, 0, 4096) as c:
        d = await c.complete([*start(), stored(g), *results(g), ChatMessage(role="user", content="and x")], [TOOL])
    convo = [*start(), stored(g), *results(g), ChatMessage(role="user", content="and x"), stored(d), *results(d),
             ChatMessage(role="user", content="thanks")]
    async with openai(model, gemini.model) as c:  # back on Gemini: its signature goes back, DeepSeek's nothing
        assert (await c.complete(convo, [TOOL])).text == "ok"
    sent = json.dumps(model.requests[-1].body)
    assert gemini.issued[g.tool_calls[0].id] in sent and "reasoning_content" not in sent
    other = start_fake_model()
    try:
        other.rules += [OpenAIStrict(), AnthropicThinking()]
        async with OpenAIClient(other.url_openai, KEY, "gpt-5", 5, 0, 4096) as c:
            assert (await c.complete(convo, [TOOL])).text == "echo: thanks"
        async with AnthropicClient(other.url_anthropic, KEY, "claude", 5, 0, 4096) as c:
            assert (await c.complete(convo, [TOOL])).text == "echo: thanks"
        assert len(other.requests) == 2
        assert all("extra_content" not in json.dumps(r.body) and "reasoning_content" not in json.dumps(r.body)
                   for r in other.requests)
    finally:
        other.stop()


def test_thinking_and_reasoning_effort_are_validated_with_a_clear_error() -> None:
    ok = parse_config({"model": {"provider": "anthropic", "max_tokens": 8000, "thinking": {"budget_tokens": 4000}}})
    assert ok.model.thinking is not None and ok.model.thinking.budget_tokens == 4000
    cases = [
        ({"provider": "anthropic", "thinking": {"budget_tokens": 512}, "max_tokens": 8000},
         "greater than or equal to 1024"),
        ({"provider": "anthropic", "thinking": {"budget_tokens": 4096}, "max_tokens": 2048},
         "must be less than max_tokens (2048)"),
        ({"provider": "openai", "thinking": {"budget_tokens": 4096}}, "for an OpenAI-compatible reasoning model set"),
        ({"provider": "anthropic", "reasoning_effort": "high"}, "turn thinking on with thinking = {"),
        ({"provider": "openai", "reasoning_effort": "max"}, "reasoning_effort"),
    ]
    for raw, words in cases:
        with pytest.raises(ConfigError) as err:
            parse_config({"model": raw})
        assert words in str(err.value) and "[model" in str(err.value), str(err.value)


@pytest.mark.parametrize(("url", "field"), [("openai", "reasoning_effort"), ("openrouter", "reasoning")])
async def test_reasoning_effort_is_sent_as_the_servers_documented_field(model: FakeModel, url: str,
                                                                        field: str) -> None:
    model.rules.append(OpenAIStrict())
    base = model.url_openai if url == "openai" else "https://openrouter.ai/api/v1"
    async with OpenAIClient(base, KEY, "o4-mini", 5, 0, 4096, reasoning_effort="high") as c:
        body = c.request_body(start(), [TOOL], "o4-mini")
        if url == "openai":
            await c.complete(start(), [TOOL])
            body = model.requests[0].body
    assert body[field] == ("high" if field == "reasoning_effort" else {"effort": "high"})


# -- 5: <think> in the content --------------------------------------------------------------------------


@pytest.mark.parametrize("opened_in_prompt", [False, True], ids=["block", "closing-tag-only"])
async def test_a_leading_think_block_is_never_shown_nor_sent_back(model: FakeModel, streamed: bool,
                                                                  opened_in_prompt: bool) -> None:
    local = ThinkInContent(opened_in_prompt)
    model.script(local.calls(("task_create", {"title": "milk"}), thinking="SECRET-PLAN"),
                 local.reply("Added milk.", thinking="SECRET-CHECK"))
    shown = Shown()
    async with openai(model, local.model) as c:
        first = await ask(c, convo := start(), streamed, shown)
        convo += [stored(first), *results(first)]
        second = await ask(c, convo, streamed, shown)
    assert second.text == "Added milk." and first.text == ""
    assert "SECRET" not in shown.text and "think>" not in shown.text
    assert "SECRET" not in json.dumps(model.requests[1].body)
    # Without the opening tag the reasoning streams until `</think>` shows it was reasoning, then is withdrawn.
    assert len(shown.withdrawn) == (2 if streamed and opened_in_prompt else 0)


def test_think_filter_splits_and_edge_cases() -> None:
    for pieces, out in [(["<th", "ink>a", "b</th", "ink>", "\n\n", "Hi", " there"], "Hi there"),
                        (["  <", "b>bold</b>"], "  <b>bold</b>"), (["<thinking about it"], "<thinking about it"),
                        (["<think>never closed"], ""), (["Plain ", "<think>x</think>"], "Plain <think>x</think>"),
                        (["reason", "ing</th", "ink>\n\nAnswer", " here"], "Answer here"),
                        (["why</think>Yes"], "Yes"),
                        (["a <think>b</think> c</think>d"], "a <think>b</think> c</think>d"),
                        (["no tags ", "at all <thi"], "no tags at all <thi"), (["x</think>", "  "], "")]:
        f, seen = ThinkFilter(), ""
        for shown in [*(f.feed(p) for p in pieces), f.end()]:
            seen = shown if isinstance(shown, Restart) else seen + shown  # a Restart starts the text over
        assert seen == out, pieces
        assert strip_think("".join(pieces)) == out


async def test_a_reply_that_is_only_thinking_says_so(model: FakeModel, streamed: bool) -> None:
    model.script(openai_raw("qwen3", {"content": "<think>SECRET and on and on"},
                            [{"content": "<think>SECRET"}, {"content": " and on and on"}], "length"))
    async with openai(model) as c:
        answer = await ask(c, start(), streamed)
    assert answer.text == ONLY_THINKING


# -- 6: refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_refusal_is_said_and_the_refused_exchange_is_not_sent_again(model: FakeModel, streamed: bool,
                                                                            provider: str) -> None:
    refuses = Refuses("FORBIDDEN")
    model.rules.append(refuses)
    make = openai if provider == "openai" else anthropic
    async with make(model) as c:
        convo = start("tell me FORBIDDEN")
        refused = await ask(c, convo, streamed)
        assert refused.refused and refused.text.startswith("⚠️ the model declined: ")
        if provider == "openai":
            assert "I'm sorry, but I can't help with that request." in refused.text
        convo += [stored(refused), ChatMessage(role="user", content="what time is it")]
        after = await ask(c, convo, streamed)
    assert after.text == "echo: what time is it" and refuses.refusals == 1
    assert "FORBIDDEN" not in json.dumps(model.requests[-1].body)


# -- 7: error bodies ------------------------------------------------------------------------------------

ERROR_BODIES = {
    "openai": {"error": {"message": "Invalid model 'gpt-9'.", "type": "invalid_request_error", "param": "model",
                         "code": "model_not_found"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}},
    "gemini list": [{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                               "status": "INVALID_ARGUMENT"}}],
    "gemini object": {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                                "status": "RESOURCE_EXHAUSTED"}},
    "openrouter": {"error": {"code": 400, "message": "Provider returned error",
                             "metadata": {"provider_name": "Anthropic",
                                          "raw": json.dumps({"type": "error", "error": {
                                              "type": "invalid_request_error", "message": "prompt is too long"}})}}},
    "ollama": {"error": "model \"llama9\" not found, try pulling it first"},
    "vllm": {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "param": None,
             "code": 404},
}
EXPECTED = {
    "openai": "Invalid model 'gpt-9'.", "anthropic": "max_tokens: too large",
    "gemini list": "API key not valid. Please pass a valid API key.",
    "gemini object": "Resource has been exhausted (e.g. check quota).",
    "openrouter": "Provider returned error (Anthropic: prompt is too long)",
    "ollama": 'model "llama9" not found, try pulling it first', "vllm": "The model `x` does not exist.",
}


@pytest.mark.parametrize("shape", sorted(ERROR_BODIES))
async def test_provider_error_bodies_are_shown_as_the_providers_words(model: FakeModel, shape: str,
                                                                      streamed: bool) -> None:
    code = 429 if shape == "gemini object" else 400
    model.script(Status(code, body=ERROR_BODIES[shape]))
    async with openai(model) as c:
        with pytest.raises(ModelUnavailable) as err:
            await ask(c, start(), streamed)
    assert f'the provider says: "{EXPECTED[shape]}"' in str(err.value), str(err.value)


def test_the_key_and_base_url_a_provider_echoes_are_never_shown() -> None:
    body = json.dumps({"error": {"message": f"bad key {KEY} for https://gw.example/v1?key={KEY}&x=1"}}).encode()
    words = provider_words(body, (KEY, "https://gw.example/v1?key=" + KEY + "&x=1", "https://gw.example/v1"))
    assert KEY not in words and "gw.example" not in words
    assert provider_words(b"<html>502 Bad Gateway</html>") == "<html>502 Bad Gateway</html>"
    assert provider_words(b"[]") == "" and provider_words(json.dumps({"error": "x" * 500}).encode()).endswith("…")


async def test_anthropic_refusal_keeps_nothing_of_the_partial_text(model: FakeModel) -> None:
    model.script(anthropic_raw("claude", [{"type": "text", "text": "Sure, here is how to"}], "refusal"))
    async with anthropic(model) as c:
        answer = await c.complete(start(), [])
    assert answer.refused and "Sure, here is how to" not in answer.text
