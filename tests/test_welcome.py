"""The first conversation teaches: with `[runtime] welcome` (anyy setup writes it) an owner's first message on
each surface gets a welcome before its answer, once per owner per surface, across restarts."""

from __future__ import annotations

from typing import Any

from gateway.turns.welcome import welcome_text
from tests.fixtures.model import FakeModel
from tests.fixtures.slack import FakeSlack, is_post
from tests.support.slack_events import OWNER, dm, event_body
from tests.support.telegram_api import OWNER_ID, FakeBot

WELCOME = {"runtime": {"welcome": True}}


def texts(tg: FakeBot, chat_id: int = OWNER_ID) -> list[str]:
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == chat_id and m["from"]["id"] == tg.id]


async def test_telegram_owner_is_welcomed_once_even_across_a_restart(tg: FakeBot, model: FakeModel,
                                                                     telegram_gateway: Any) -> None:
    second = OWNER_ID + 1
    owners = {"telegram": {"allowed_users": [OWNER_ID, second]}, **WELCOME}
    async with telegram_gateway(**owners) as gw:
        tg.message("hello")
        await tg.wait_calls("sendMessage", 2)
        await gw.idle()
        welcome, answer = texts(tg)
        assert welcome.startswith("Welcome! I'm Anyy") and answer == "echo: hello"
        assert "keep your tasks" in welcome and "remind you" in welcome  # toolsets present
        assert "read your mail" not in welcome  # no email configured
        assert "No mail or calendar account is connected yet" in welcome
        assert welcome.count("\n• ") == 3  # three example requests
        assert "Approve and Deny buttons" in welcome and "/help" in welcome
        tg.message("again")
        await tg.wait_calls("sendMessage", 3)
        await gw.idle()
        assert texts(tg)[2:] == ["echo: again"]
    async with telegram_gateway(**owners) as gw:  # a restart on the same store
        tg.message("after the restart")
        await tg.wait_calls("sendMessage", 4)
        tg.message("I am the other owner", user_id=second)
        await tg.wait_calls("sendMessage", 6)
        await gw.idle()
    assert texts(tg)[3:] == ["echo: after the restart"]
    other = texts(tg, second)
    assert other[0].startswith("Welcome!") and other[1] == "echo: I am the other owner"


async def test_no_welcome_unless_setup_turned_it_on(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        tg.message("hello")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    assert texts(tg) == ["echo: hello"]


async def test_slack_owner_is_welcomed_on_slack_too(slack_fake: FakeSlack, model: FakeModel,
                                                    slack_gateway: Any) -> None:
    async with slack_gateway(**WELCOME) as gw:
        await slack_fake.send_envelope("events_api", event_body(dm("hi", user=OWNER)))
        posts = await slack_fake.calls.wait(is_post, count=2)
        await gw.idle()
    assert posts[0].args["text"].startswith("Welcome!") and posts[1].args["text"] == "echo: hi"


async def test_console_welcome_says_how_to_approve_there(start_console: Any, make_config: Any) -> None:
    harness = await start_console(make_config(**WELCOME))
    out = await harness.say("hello")
    assert "Welcome!" in out and "/approve ID" in out, out
    assert "Welcome!" not in await harness.say("hello again")


def test_welcome_lists_connected_accounts_and_examples_for_what_is_there() -> None:
    text = welcome_text(["email", "calendar", "tasks", "web"], ["personal (me@example.com)"], buttons=True)
    assert "Accounts connected: personal (me@example.com)." in text
    assert "• What's on my calendar tomorrow?" in text and "• Any mail from my bank" in text
    assert "read, sort and draft your mail" in text


async def test_password_mail_and_calendar_count_as_connected_accounts(start_console: Any, make_config: Any) -> None:
    harness = await start_console(make_config(
        email={"imap_host": "127.0.0.1", "smtp_host": "127.0.0.1", "username": "me@example.com",
               "from_address": "me@example.com"},
        calendar={"url": "https://127.0.0.1:9/dav/", "username": "me@example.com"}, **WELCOME))
    out = await harness.say("hello")
    assert "Accounts connected: default (me@example.com)." in out, out  # one account serving both
    assert "No mail or calendar account is connected yet" not in out
