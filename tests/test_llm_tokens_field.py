"""The reply-length field of the OpenAI wire: `max_completion_tokens` where OpenAI requires it, `max_tokens`
where local servers expect it, and the `[model] max_tokens_field` override — through `anyy chat`."""

from __future__ import annotations

import pytest

from gateway.llm.openai import tokens_field
from tests.support.cli import anyy, write_config


def _config(tmp_path, model, name: str, extra: str = "") -> str:
    return write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "{name}"\n'
                                  f"timeout_s = 10\nmax_retries = 0\n{extra}")


@pytest.mark.parametrize("name", ["gpt-5.1-mini", "o3", "o4-mini"])
async def test_current_openai_models_get_max_completion_tokens(tmp_path, home, model, name):
    code, out, err = await anyy("chat", "--config", _config(tmp_path, model, name), env=home, stdin="hello\n")
    assert code == 0, err
    assert out.splitlines() == ["echo: hello"], out
    body = model.requests[-1].body
    assert body["max_completion_tokens"] == 2048 and "max_tokens" not in body


async def test_a_local_model_keeps_max_tokens(tmp_path, home, model):
    code, out, err = await anyy("chat", "--config", _config(tmp_path, model, "qwen2.5:7b"), env=home, stdin="hi\n")
    assert code == 0 and out.splitlines() == ["echo: hi"], err
    body = model.requests[-1].body
    assert body["max_tokens"] == 2048 and "max_completion_tokens" not in body


async def test_the_override_wins_and_the_refusal_is_shown(tmp_path, home, model):
    cfg = _config(tmp_path, model, "gpt-5", 'max_tokens_field = "max_tokens"\n')
    code, out, _ = await anyy("chat", "--config", cfg, env=home, stdin="hi\n")
    assert code == 0
    assert "max_completion_tokens" in out  # OpenAI's 400 reaches the owner, not a traceback
    assert "max_tokens" in model.requests[-1].body


def test_api_openai_com_gets_the_new_field_for_any_model():
    assert tokens_field("https://api.openai.com/v1", "gpt-4.1-mini") == "max_completion_tokens"
    assert tokens_field("https://openrouter.ai/api/v1", "openai/gpt-5") == "max_completion_tokens"
    assert tokens_field("http://127.0.0.1:11434/v1", "llama3") == "max_tokens"
    assert tokens_field("https://api.openai.com/v1", "o1", "max_tokens") == "max_tokens"
