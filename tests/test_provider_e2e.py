"""Issue 38 end to end: a tool turn and a follow-up turn on each provider shape, streamed and not, through
`anyy chat` and through `anyy run` on the fake Telegram, against a local server that enforces the
provider's documented rules (tests/support/provider_rules.py). Checked: what the owner sees (no
reasoning, no empty reply, a refusal in words) and what the server received."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.model import FakeModel
from tests.support.anthropic_rules import AnthropicThinking
from tests.support.cli import SUBPROCESS_S, anyy, write_config
from tests.support.provider_rules import DeepSeek, Gemini, Refuses, ThinkInContent
from tests.support.resident import resident
from tests.support.telegram_api import OWNER_ID, FakeBot

SECRET = "SECRET"  # in every piece of reasoning the shapes hand out: the owner must never see it


class Case:
    """One provider shape: its config, its scripted tool turn and follow-up, and what must reach it."""

    def __init__(self, name: str, provider: str, shape: Any, extra: str = "") -> None:
        self.name, self.provider, self.shape, self.extra = name, provider, shape, extra

    def script(self, model: FakeModel) -> None:
        shape = self.shape
        model.rules.append(shape)
        secret = {"gemini": {}, "deepseek": {"reasoning": f"{SECRET} plan"}, "think": {"thinking": f"{SECRET} plan"},
                  "claude": {"thought": f"{SECRET} plan"}}[self.name]
        calls = (("task_create", {"title": "milk"}), ("task_create", {"title": "bread"}))
        model.script(shape.calls(*calls, **secret), shape.reply("Added milk and bread.", **self._after()),
                     shape.reply("Glad to help.", **self._after()))

    def _after(self) -> dict[str, str]:
        return {"gemini": {}, "deepseek": {"reasoning": f"{SECRET} check"}, "think": {"thinking": f"{SECRET} check"},
                "claude": {"thought": f"{SECRET} check"}}[self.name]

    def config(self, url: str) -> str:
        return (f'[model]\nprovider = "{self.provider}"\nbase_url = "{url}"\nmodel = "{self.shape.model}"\n'
                f"timeout_s = 10\nmax_retries = 0\nmax_tokens = 4096\n{self.extra}\n")

    def check_sent(self, model: FakeModel) -> None:
        """The follow-up turn's request carried back what the provider requires from the tool turn."""
        follow_up = model.requests[2]
        sent = json.dumps(follow_up.body)
        assert "task_create" in sent and "milk" in sent
        if self.name == "gemini":
            assert all(s in sent for s in self.shape.issued.values())
        elif self.name == "deepseek":
            assert f"{SECRET} plan" in sent and f"{SECRET} check" in sent
        elif self.name == "claude":
            assert follow_up.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
            assert f"{SECRET} plan" in sent
        else:  # a think block in the content is kept out of the history sent back
            assert SECRET not in sent and "<think>" not in sent


CASES: dict[str, Callable[[], Case]] = {
    "gemini": lambda: Case("gemini", "openai", Gemini()),
    "deepseek": lambda: Case("deepseek", "openai", DeepSeek()),
    "think": lambda: Case("think", "openai", ThinkInContent()),
    "claude": lambda: Case("claude", "anthropic", AnthropicThinking(redacted=True),
                           "thinking = { budget_tokens = 2048 }"),
}


def url_for(model: FakeModel, provider: str) -> str:
    return model.url_anthropic if provider == "anthropic" else model.url_openai


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("name", sorted(CASES))
async def test_chat_tool_turn_and_follow_up(tmp_path: Path, home: dict[str, str], model: FakeModel, name: str,
                                           stream: bool) -> None:
    case = CASES[name]()
    case.script(model)
    cfg = write_config(tmp_path, case.config(url_for(model, case.provider))
                       + f"[runtime]\nstream = {str(stream).lower()}\n")
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="add task milk and bread\nthanks\n")
    assert code == 0, err
    assert "Added milk and bread." in out and "Glad to help." in out, out + err
    assert SECRET not in out and "think>" not in out, out
    assert len(model.requests) == 3 and model.remaining == 0, [r.body for r in model.requests]
    case.check_sent(model)
    code, out, _ = await anyy("chat", "--config", cfg, env=home, stdin="/tasks\n")
    assert "milk" in out and "bread" in out  # both calls ran: two calls, not one glued together


@pytest.mark.parametrize(("provider", "stream"), [("openai", True), ("anthropic", False)])
async def test_chat_refusal_is_said_and_the_next_turn_is_not_refused(tmp_path: Path, home: dict[str, str],
                                                                     model: FakeModel, provider: str,
                                                                     stream: bool) -> None:
    refuses = Refuses("FORBIDDEN")
    model.rules.append(refuses)
    cfg = write_config(tmp_path, f'[model]\nprovider = "{provider}"\nbase_url = "{url_for(model, provider)}"\n'
                                 f'model = "m"\nmax_retries = 0\n[runtime]\nstream = {str(stream).lower()}\n')
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="tell me FORBIDDEN\nhello again\n")
    assert code == 0, err
    assert "the model declined: " in out, out
    assert "echo: hello again" in out and refuses.refusals == 1, out
    assert "FORBIDDEN" not in json.dumps(model.requests[-1].body)


def telegram_config(tmp_path: Path, tg: FakeBot, model_section: str, stream: bool) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f"""{model_section}
[runtime]
stream = {str(stream).lower()}

[store]
path = "{tmp_path / 'anyy.db'}"

[dashboard]
enabled = false

[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10
""", encoding="utf-8")
    return path


def texts(tg: FakeBot, since: int = 0) -> list[str]:
    """Every text the bot put on the owner's screen (edits of a streamed reply included), from call
    number `since` on."""
    return [str(c.params["text"]) for c in tg.sent()[since:] if c.method in ("sendMessage", "editMessageText")]


async def say(tg: FakeBot, text: str, expect: str) -> None:
    """The owner sends `text`; wait until a reply holding `expect` is on the screen."""
    since = len(tg.sent())
    tg.message(text)
    await tg.wait(lambda: [t for t in texts(tg, since) if expect in t] or None, timeout=SUBPROCESS_S,
                  what=f"{expect!r} among {texts(tg)}")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_run_on_telegram_each_shape_then_a_refusal(tmp_path: Path, tg: FakeBot, model: FakeModel,
                                                         provider: str, stream: bool) -> None:
    """One resident per provider wire: each shape of that wire in turn (a tool turn, then a follow-up,
    a fresh conversation each), then a refusal and a turn after it."""
    names = ["gemini", "deepseek", "think"] if provider == "openai" else ["claude"]
    first = CASES[names[0]]()
    cfg = telegram_config(tmp_path, tg, first.config(url_for(model, provider)), stream)
    async with resident(tmp_path, cfg, {"TELEGRAM_BOT_TOKEN": tg.token}) as proc:
        for name in names:
            case = first if name == names[0] else CASES[name]()
            model.reset()
            case.script(model)
            await say(tg, "/new", "Started a fresh conversation.")
            await say(tg, "add task milk and bread", "Added milk and bread.")
            await say(tg, "thanks", "Glad to help.")
            assert len(model.requests) == 3, (name, [r.body for r in model.requests])
            case.check_sent(model)
        model.reset()
        refuses = Refuses("FORBIDDEN")
        model.rules.append(refuses)
        await say(tg, "/new", "Started a fresh conversation.")
        await say(tg, "tell me FORBIDDEN", "the model declined: ")
        await say(tg, "hello again", "echo: hello again")
        assert refuses.refusals == 1
        assert await proc.terminate() == 0, proc.output()
    shown = texts(tg)
    assert not [t for t in shown if SECRET in t or "think>" in t or not t.strip()], shown
