"""The model clients against the fake model server, for both providers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, ModelConfig
from gateway.llm import (
    AnthropicClient,
    ChatMessage,
    ModelUnavailable,
    OpenAIClient,
    ToolCall,
    ToolSchema,
    make_client,
)
from gateway.llm.http import HttpModelClient
from gateway.llm.retry import RetryPolicy, parse_retry_after
from tests.fixtures.model import (
    FakeModel,
    hang,
    malformed_args,
    reply,
    start_fake_model,
    status,
    tool_call,
    tool_calls,
)
from tests.support.ports import port_of, refusing_socket

KEY = "sk-test-secret-123"
TASK_TOOL = ToolSchema(name="task_create", description="Create a task.",
                       parameters={"type": "object", "properties": {"title": {"type": "string"}}})


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return request.param


def client(provider: str, fake: FakeModel, **overrides: Any) -> HttpModelClient:
    """A client for `provider` at the fake, with retries fast enough for tests."""
    cls, url = (OpenAIClient, fake.url_openai) if provider == "openai" else (AnthropicClient, fake.url_anthropic)
    kw: dict[str, Any] = dict(base_url=url, api_key=KEY, model="main", timeout_s=5, max_retries=2, max_tokens=256,
                              api_key_env="ANYY_TEST_KEY", backoff_base_s=0.001)
    kw.update(overrides)
    return cls(**kw)


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=text)]


async def test_plain_reply_with_usage(provider: str, model: FakeModel) -> None:
    model.script(reply("hi there", usage=(12, 3)))
    async with client(provider, model) as c:
        answer = await c.complete(user("hello"), [])
    assert (answer.text, answer.tool_calls, answer.model) == ("hi there", [], "main")
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 3)
    [sent] = model.requests
    assert "tools" not in sent.body and sent.body["max_tokens"] == 256
    if provider == "openai":
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    else:
        assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.body["system"] == [{"type": "text", "text": "Be brief."}]
        assert sent.messages == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


async def test_default_responder_echoes_and_reports_usage(provider: str, model: FakeModel) -> None:
    async with client(provider, model) as c:
        answer = await c.complete(user("ping"), [])
    assert answer.text == "echo: ping"
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0


async def test_custom_responder(provider: str, model: FakeModel) -> None:
    model.responder = lambda body: reply(f"{len(body['messages'])} messages")
    async with client(provider, model) as c:
        assert (await c.complete(user("x"), [])).text == ("2 messages" if provider == "openai" else "1 messages")


async def test_tool_call_round_trip(provider: str, model: FakeModel) -> None:
    model.script(tool_call("task_create", {"title": "milk"}, call_id="c1"), reply("Added."))
    async with client(provider, model) as c:
        first = await c.complete(user("remind me of milk"), [TASK_TOOL])
        assert first.tool_calls == [ToolCall(id="c1", name="task_create", arguments='{"title": "milk"}')]
        history = [
            *user("remind me of milk"),
            ChatMessage(role="assistant", content=first.text, tool_calls=first.tool_calls),
            ChatMessage(role="tool", tool_call_id="c1", name="task_create", content="task 7 created"),
        ]
        second = await c.complete(history, [TASK_TOOL])
    assert second.text == "Added."
    sent = model.requests[1]
    if provider == "openai":
        assert sent.body["tools"] == [{"type": "function", "function": TASK_TOOL.model_dump()}]
        call = {"id": "c1", "type": "function", "function": {"name": "task_create", "arguments": '{"title": "milk"}'}}
        assert sent.messages[-2:] == [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "task 7 created"},
        ]
    else:
        assert sent.body["tools"] == [{"name": "task_create", "description": "Create a task.",
                                       "input_schema": TASK_TOOL.parameters, "cache_control": {"type": "ephemeral"}}]
        assert sent.messages[-2:] == [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "task_create",
                                               "input": {"title": "milk"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "task 7 created",
                                          "cache_control": {"type": "ephemeral"}}]},  # the next round repeats it
        ]
    assert sent.tool_names == ["task_create"]


async def test_several_tool_calls_in_one_reply(provider: str, model: FakeModel) -> None:
    model.script(tool_calls([tool_call("a", {"n": 1}, "id-a"), ("b", '{"n": 2}')], text="Doing both."), reply("done"))
    async with client(provider, model) as c:
        first = await c.complete(user("go"), [TASK_TOOL])
        assert first.text == "Doing both."
        assert [(t.name, json.loads(t.arguments)) for t in first.tool_calls] == [("a", {"n": 1}), ("b", {"n": 2})]
        assert first.tool_calls[0].id == "id-a" and first.tool_calls[1].id
        history = [*user("go"), ChatMessage(role="assistant", content=first.text, tool_calls=first.tool_calls)]
        history += [ChatMessage(role="tool", tool_call_id=t.id, content=f"ok {t.name}") for t in first.tool_calls]
        history.append(ChatMessage(role="user", content="and then?"))  # an event arriving right after the results
        assert (await c.complete(history, [TASK_TOOL])).text == "done"
    sent = model.requests[1].messages
    if provider == "anthropic":  # results and the following text merged into one user turn, results first
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert [b["type"] for b in sent[-1]["content"]] == ["tool_result", "tool_result", "text"]
    else:
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]


async def test_malformed_arguments_pass_through_raw(provider: str, model: FakeModel) -> None:
    model.script(malformed_args("task_create", "{not json", "m1"), reply("sorry"))
    async with client(provider, model) as c:
        first = await c.complete(user("x"), [TASK_TOOL])
        assert first.tool_calls == [ToolCall(id="m1", name="task_create", arguments="{not json")]
        history = [*user("x"), ChatMessage(role="assistant", tool_calls=first.tool_calls),
                   ChatMessage(role="tool", tool_call_id="m1", content="invalid JSON arguments")]
        assert (await c.complete(history, [TASK_TOOL])).text == "sorry"  # the fake accepted the transcript


async def test_retry_after_is_honoured(provider: str, model: FakeModel) -> None:
    model.script(status(429, {"Retry-After": "0.3"}), reply("ok"))
    async with client(provider, model) as c:
        started = time.monotonic()
        assert (await c.complete(user("x"), [])).text == "ok"
    assert time.monotonic() - started >= 0.3
    assert len(model.requests) == 2


async def test_server_errors_then_success(provider: str, model: FakeModel) -> None:
    model.script(status(500), status(529), reply("ok"))
    async with client(provider, model) as c:
        assert (await c.complete(user("x"), [])).text == "ok"
    assert len(model.requests) == 3


async def test_persistent_server_error_is_unavailable(provider: str, model: FakeModel) -> None:
    model.responder = lambda body: status(503)
    async with client(provider, model, max_retries=2) as c:
        with pytest.raises(ModelUnavailable) as err:
            await c.complete(user("x"), [])
    base = model.url_openai if provider == "openai" else model.url_anthropic
    assert str(err.value).startswith(f"the model at {base} is not answering: HTTP 503 Service Unavailable")
    assert err.value.status == 503  # the last answer's, for a caller that tells causes apart
    assert len(model.requests) == 3


async def test_fallback_model_after_main_keeps_failing(provider: str, model: FakeModel) -> None:
    model.script(status(500), status(500), reply("from backup"))
    async with client(provider, model, max_retries=1, fallback_model="backup") as c:
        answer = await c.complete(user("x"), [])
    assert [r.model for r in model.requests] == ["main", "main", "backup"]
    assert (answer.text, answer.model) == ("from backup", "backup")


async def test_fallback_failing_too_names_both(provider: str, model: FakeModel) -> None:
    model.responder = lambda body: status(500)
    async with client(provider, model, max_retries=0, fallback_model="backup") as c:
        with pytest.raises(ModelUnavailable, match="'main', 'backup'"):
            await c.complete(user("x"), [])
    assert [r.model for r in model.requests] == ["main", "backup"]


async def test_hang_times_out(provider: str, model: FakeModel) -> None:
    model.script(hang(30))
    async with client(provider, model, timeout_s=0.2, max_retries=0) as c:
        started = time.monotonic()
        with pytest.raises(ModelUnavailable, match=r"is not answering: timed out after 0\.2s"):
            await c.complete(user("x"), [])
    assert time.monotonic() - started < 5


async def test_connection_refused(provider: str, model: FakeModel) -> None:
    with refusing_socket() as closed:
        url = f"http://127.0.0.1:{port_of(closed)}"
        async with client(provider, model, base_url=url + ("/v1" if provider == "openai" else "")) as c:
            with pytest.raises(ModelUnavailable) as err:
                await c.complete(user("x"), [])
    assert f"the model at {url}" in str(err.value) and "connection refused" in str(err.value)
    assert err.value.status is None  # no answer at all


async def test_unauthorized_is_not_retried_and_hides_the_key(provider: str, model: FakeModel) -> None:
    message = f"Incorrect API key provided: {KEY}"
    body = ({"error": {"message": message, "type": "invalid_request_error"}} if provider == "openai"
            else {"type": "error", "error": {"type": "authentication_error", "message": message}})
    model.script(status(401, body=body), reply("never"))
    async with client(provider, model) as c:
        with pytest.raises(ModelUnavailable) as err:
            await c.complete(user("x"), [])
    text = str(err.value)
    assert 'HTTP 401 Unauthorized; the provider says: "Incorrect API key provided' in text and "$ANYY_TEST_KEY" in text
    assert KEY not in text and err.value.status == 401
    assert len(model.requests) == 1 and model.remaining == 1


async def test_invalid_transcript_is_refused_not_retried(provider: str, model: FakeModel) -> None:
    orphan = [*user("x"), ChatMessage(role="tool", tool_call_id="nope", content="result of nothing")]
    async with client(provider, model) as c:
        with pytest.raises(ModelUnavailable,
                           match=r"refused the request: HTTP 400 Bad Request; the provider says: \".*nope"):
            await c.complete(orphan, [])
    assert len(model.requests) == 1


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_anthropic_base_url_with_or_without_version(suffix: str, model: FakeModel) -> None:
    async with client("anthropic", model, base_url=model.url_anthropic + suffix) as c:
        assert (await c.complete(user("x"), [])).text == "echo: x"
    assert model.requests[0].path == "/v1/messages"


async def test_wait_for_requests(model: FakeModel) -> None:
    async with client("openai", model) as c:
        await c.complete(user("x"), [])
    assert [r.path for r in await model.wait_for_requests(1, timeout=1)] == ["/v1/chat/completions"]
    with pytest.raises(TimeoutError):
        await model.wait_for_requests(2, timeout=0.05)


def test_parse_retry_after() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": format_datetime(now + timedelta(seconds=30), usegmt=True)}, now) == 30.0
    assert parse_retry_after({"retry-after": format_datetime(now - timedelta(seconds=30), usegmt=True)}, now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_is_jittered_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=20, retry_after_cap_s=60)
    delays = [policy.delay(2, None) for _ in range(200)]
    assert all(0 <= d <= 2.0 for d in delays) and len(set(delays)) > 1
    assert all(policy.delay(10, None) <= 20 for _ in range(200))
    assert policy.delay(0, 3.0) == 3.0 and policy.delay(0, 3600.0) == 60.0


def test_make_client_picks_the_provider() -> None:
    cfg = ModelConfig(provider="anthropic", base_url="http://127.0.0.1:1", model="m", fallback_model="f")
    made = make_client(cfg, "k")
    assert isinstance(made, AnthropicClient) and made.fallback_model == "f"
    assert isinstance(make_client(ModelConfig(base_url="http://127.0.0.1:1/v1", model="m"), None), OpenAIClient)
    with pytest.raises(ConfigError, match="base_url"):
        make_client(ModelConfig(), None)


@pytest.fixture
def standalone() -> Iterator[list[str]]:
    """`python -m tests.fixtures.model` as a subprocess; yields the two URLs it printed."""
    with subprocess.Popen([sys.executable, "-m", "tests.fixtures.model", "--port", "0"],
                          stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent) as proc:
        assert proc.stdout is not None
        yield [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        proc.terminate()
        assert proc.wait(timeout=10) == 0


async def test_standalone_server(standalone: list[str]) -> None:
    openai_url, anthropic_url = standalone
    async with OpenAIClient(openai_url, None, "m", 5, 0, 64) as c:
        assert (await c.complete(user("a"), [])).text == "echo: a"
    async with AnthropicClient(anthropic_url, None, "m", 5, 0, 64) as c:
        assert (await c.complete(user("b"), [])).text == "echo: b"


def test_start_fake_model_outside_pytest() -> None:
    fake = start_fake_model()
    try:
        assert fake.port and fake.url_openai == f"http://127.0.0.1:{fake.port}/v1"
    finally:
        fake.stop()


async def test_prompt_cache_breakpoints_and_cached_tokens(provider: str, model: FakeModel) -> None:
    model.script(reply("ok", usage=(5000, 20, 4096)))
    system = ChatMessage(role="system", content="STABLE PART\n\nCurrent time: 12:00", stable_chars=len("STABLE PART"))
    async with client(provider, model) as c:
        answer = await c.complete([system, ChatMessage(role="user", content="hi")], [TASK_TOOL])
    assert (answer.usage.input_tokens, answer.usage.cached_tokens, answer.usage.output_tokens) == (5000, 4096, 20)
    [sent] = model.requests
    if provider == "anthropic":  # the stable prefix and the tools carry breakpoints; the time does not
        assert sent.body["system"] == [{"type": "text", "text": "STABLE PART", "cache_control": {"type": "ephemeral"}},
                                       {"type": "text", "text": "Current time: 12:00"}]
        assert sent.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    else:  # automatic prefix caching: one system message, the stable part first
        assert sent.messages[0] == {"role": "system", "content": "STABLE PART\n\nCurrent time: 12:00"}
