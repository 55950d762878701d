"""A stranger's name reaches the owner's pairing notice as plain text on every platform: no bold, no
italics, no link, no mention (Telegram and Slack, through the real surfaces and their fakes); and a
stranger who writes in a group gets no pairing code where the group reads it."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gateway.app import Gateway
from tests.fixtures.slack import FakeSlack, is_post
from tests.support.slack_events import OWNER, press_body
from tests.support.telegram_api import GROUP_ID, OWNER_ID, FakeBot

NAME = "__X__ _Y_ www.evil.com @someone"
STRANGER_ID = 2002


@pytest_asyncio.fixture(loop_scope="function")
async def slack_owner_gateway(slack_gateway: Any) -> AsyncIterator[Gateway]:
    async with slack_gateway() as gw:
        yield gw


async def test_telegram_shows_the_name_exactly_as_written(tg: FakeBot, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        tg.message("hi", user_id=STRANGER_ID, user_name=NAME)
        [notice] = await tg.wait_calls("sendMessage", where=lambda c: c.params["chat_id"] == OWNER_ID)
        await gw.idle()
    text = notice.params["text"]
    # <pre>: Telegram shows it as written and makes no link or mention entity inside it
    assert notice.params["parse_mode"] == "HTML" and text.startswith("<pre>") and text.endswith("</pre>"), text
    assert html.escape(f"{NAME} (user {STRANGER_ID}) wants to talk to Anyy") in text, text
    for markup in ("<b>", "<i>", "<u>", "<a ", "<em>", "<strong>"):
        assert markup not in text, text


async def test_slack_shows_the_name_exactly_as_written(slack_owner_gateway: Gateway, slack_fake: FakeSlack) -> None:
    envelope = await slack_fake.send_envelope("slash_commands", {
        "token": "legacy", "team_id": "T0001", "channel_id": "D0002", "channel_name": "directmessage",
        "user_id": "USTRANGER", "user_name": NAME, "command": "/anyy", "text": "hello", "api_app_id": "A0001",
        "response_url": "https://hooks.slack.invalid/commands/1", "trigger_id": "t-name"})
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    [notice] = await slack_fake.calls.wait(lambda c: is_post(c) and c.args.get("channel") == OWNER)
    await slack_owner_gateway.idle()
    section = notice.args["blocks"][0]["text"]
    assert section["type"] == "plain_text", section  # Slack parses no markup, link or mention in plain_text
    assert f"{NAME} (user USTRANGER) wants to talk to Anyy" in section["text"]
    assert "<" not in notice.args["text"].replace("&lt;", "")  # the fallback carries no <link> or <@mention>
    # The owner's Admit: the answer, shown to the owner alone, names the stranger as written too.
    code = notice.args["blocks"][1]["elements"][0]["value"]
    body = press_body(OWNER, "anyy_admit_0", code, thread_ts=None)
    body["channel"] = {"id": OWNER}
    body["container"]["channel_id"] = OWNER
    await slack_fake.send_envelope("interactive", body)
    [answer] = await slack_fake.calls.wait(lambda c: c.method == "chat.postEphemeral")
    await slack_owner_gateway.idle()
    assert answer.args["blocks"][0]["text"] == {"type": "plain_text", "text": f"Admitted {NAME} (user USTRANGER).",
                                                "emoji": False}


async def test_a_stranger_in_a_telegram_group_gets_no_code_there_and_is_told_once(
        tg: FakeBot, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        tg.message(f"@{tg.username} hi", user_id=STRANGER_ID, user_name=NAME, chat_type="supergroup")
        [told] = await tg.wait_calls("sendMessage")
        tg.message(f"@{tg.username} hello??", user_id=STRANGER_ID, user_name=NAME, chat_type="supergroup")
        tg.message("/start", user_id=STRANGER_ID, user_name=NAME)  # in private: the code, and the owner asked
        await tg.wait_calls("sendMessage", where=lambda c: c.params["chat_id"] == OWNER_ID)
        await gw.idle()
        assert await gw.access.repo.pending() != []
    assert told.params["chat_id"] == GROUP_ID and "direct message" in told.params["text"]
    assert "pairing code is" not in told.params["text"]
    to_group = [c for c in tg.sent("sendMessage") if c.params["chat_id"] == GROUP_ID]
    assert to_group == [told]  # the second message in the group got no answer
    [code] = [c for c in tg.sent("sendMessage") if c.params["chat_id"] == STRANGER_ID]
    assert "pairing code is" in code.params["text"]
