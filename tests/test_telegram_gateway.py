"""Telegram end to end: the real Gateway (runtime, approvals, access, outbox) with the Telegram surface,
the fake Bot API (tests/fixtures/telegram.py) and the fake model (tests/fixtures/model.py); and `anyy run`
as a subprocess configured against both fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support import side_effects
from tests.support.cli import SUBPROCESS_S
from tests.support.resident import resident, run_config
from tests.support.side_effects import EXECUTED
from tests.support.telegram_api import GROUP_ID, OWNER_ID, FakeBot

STRANGER_ID = 2002


@pytest.fixture(autouse=True)
def _reset_side_effects() -> Any:
    side_effects.reset()
    yield
    side_effects.reset()


def texts(tg: FakeBot, chat_id: int = OWNER_ID) -> list[str]:
    """What the chat shows from the bot, oldest first."""
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == chat_id and m["from"]["id"] == tg.id]


async def test_message_gets_a_model_reply(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    async with telegram_gateway():
        tg.message("hello from the phone")
        await tg.wait_calls("sendMessage")
        assert texts(tg) == ["echo: hello from the phone"]
        assert len(model.requests) == 1


async def test_approval_by_button_executes_once(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.script(tool_call("side_effect", {"note": "n1"}), reply("I asked for approval."))
    async with telegram_gateway() as gw:
        # in a group, so that someone else can see (and tap) the prompt's buttons
        tg.message(f"@{tg.username} please do the side effect", chat_type="supergroup")
        [prompt_call] = await tg.wait_calls("sendMessage", where=lambda c: "reply_markup" in c.params)
        approve, deny = [k["callback_data"] for k in prompt_call.params["reply_markup"]["inline_keyboard"][0]]
        assert approve.startswith("a:") and deny == "d:" + approve[2:]
        with tg.lock:
            [prompt] = [key for key, m in tg.messages.items() if m.get("reply_markup")]
        assert prompt[0] == GROUP_ID

        def press(user_id: int = OWNER_ID) -> None:
            tg.press(prompt[1], approve, chat_id=GROUP_ID, user_id=user_id)

        press(STRANGER_ID)
        [refused] = await tg.wait_calls("answerCallbackQuery")
        assert refused.params["text"] == "You are not allowed to use this assistant; nothing changed."
        await gw.idle()
        assert EXECUTED == [] and "reply_markup" in tg.shown(*prompt)

        press()
        answers = await tg.wait_calls("answerCallbackQuery", 2)
        assert answers[1].params["text"] == "Approved; running it now."
        await tg.wait(lambda: "reply_markup" not in tg.messages[prompt], what="the prompt's buttons removed")
        await gw.idle()
        assert EXECUTED == ["n1"]
        assert "Approved" in tg.shown(*prompt)["text"]

        press()  # a second tap (another device, a stale screen)
        answers = await tg.wait_calls("answerCallbackQuery", 3)
        assert answers[2].params["text"].startswith("Already")
        await gw.idle()
        assert EXECUTED == ["n1"]


async def test_unknown_user_gets_a_pairing_code_and_no_turn(tg: FakeBot, model: FakeModel,
                                                          telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        tg.message("hi, who are you?", user_id=STRANGER_ID, user_name="eve")
        await tg.wait_calls("sendMessage")
        await gw.idle()
        [answer] = texts(tg, STRANGER_ID)
        assert "pairing code" in answer and "anyy pairing approve telegram" in answer
        assert model.requests == []


async def test_redelivered_webhook_update_is_one_turn(tg: FakeBot, model: FakeModel, telegram_gateway: Any,
                                                     unused_tcp_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYY_TEST_TG_SECRET", "hook-secret")
    url = f"http://127.0.0.1:{unused_tcp_port}/hook"
    async with telegram_gateway(telegram={"mode": "webhook", "webhook_url": url, "port": unused_tcp_port,
                                          "secret_token_env": "ANYY_TEST_TG_SECRET"}) as gw:
        update = tg.message("only once please", inject=False)
        async with aiohttp.ClientSession() as http:
            for _ in range(2):
                async with http.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret"}) as r:
                    assert r.status == 200
        await gw.idle()
        assert texts(tg) == ["echo: only once please"]
        assert len(model.requests) == 1


async def test_message_sent_while_down_is_answered_after_restart(tg: FakeBot, model: FakeModel,
                                                                 telegram_gateway: Any) -> None:
    async with telegram_gateway():
        pass
    tg.message("are you there?")
    async with telegram_gateway() as gw:
        await tg.wait_calls("sendMessage")
        await gw.idle()
    assert texts(tg) == ["echo: are you there?"]
    assert len(model.requests) == 1


async def test_anyy_run_serves_telegram(tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10""")
    async with resident(tmp_path, config, {"TELEGRAM_BOT_TOKEN": tg.token, "OPENAI_API_KEY": "test-key"}) as anyy:
        await tg.wait_calls("getUpdates", timeout=SUBPROCESS_S)  # polling: the surface is up
        tg.message("hello from the phone")
        await tg.wait_calls("sendMessage", timeout=SUBPROCESS_S)
        assert await anyy.terminate() == 0
    assert texts(tg) == ["echo: hello from the phone"]
    output = anyy.output()
    assert "telegram: up" in output
    assert tg.token not in output and "hello from the phone" not in output  # no secrets, no bodies
