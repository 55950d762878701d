"""The Telegram surface receiving, with buttons and typing, against the fake Bot API
(tests/fixtures/telegram.py) with python-telegram-bot's real code in between; the gateway side is the
recording port of tests/support/telegram_port.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from gateway.surfaces.telegram import TelegramSurface
from gateway.turns.commands import Commands
from store.records import Button, Inbound
from tests.support.telegram_api import GROUP_ID, OWNER_ID, FakeBot
from tests.support.telegram_port import APPROVAL, OWNER, RecordingPort, item, running

# -- receiving --------------------------------------------------------------------------------------


async def test_message_reaches_gateway_as_inbound(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, port):
        assert surface.status() == "up"
        tg.message(f"@{tg.username} hi")  # a mention in a private chat is not part of the message
        update = tg.message("hello there")
        await port.wait(lambda: len(port.inbounds) == 2)
        assert port.inbounds[0].text == "hi"
        assert port.inbounds[1] == Inbound(
            surface="telegram", chat_id=str(OWNER_ID), user_id=str(OWNER_ID), text="hello there",
            user_name="owner", is_group=False, platform_message_id=str(update["message"]["message_id"]))
        await tg.wait(lambda: not tg.pending, what="the update to be confirmed")
        commands = [c["command"] for c in tg.sent("setMyCommands")[0].params["commands"]]
        table = Commands(None, None).table  # type: ignore[arg-type]  # only its names are read
        assert set(commands) == set(table) - {"start"}  # every slash command is in the menu
        # polling must not throw away what arrived while the bot was down
        assert all(not c.params.get("drop_pending_updates") for c in tg.sent("deleteWebhook"))
    assert surface.status() == "down"
    # stopping interrupts the long poll and still confirms what was handled, in one more getUpdates
    assert tg.sent("getUpdates")[-1].params == {"timeout": 0, "offset": update["update_id"] + 1,
                                                "allowed_updates": ["message", "callback_query"]}


async def test_group_needs_a_mention_or_a_reply(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, port):
        tg.message("lunch anyone?", chat_type="supergroup", user_id=2002, user_name="bob")
        tg.message(f"@{tg.username} what is on my calendar", chat_type="supergroup")
        await port.wait(lambda: len(port.inbounds) == 1)
        first = port.inbounds[0]
        assert (first.text, first.is_group, first.chat_id, first.thread_id) == (
            "what is on my calendar", True, str(GROUP_ID), None)

        sent_id = await surface.deliver(item("Two meetings.", origin=first.origin), None)
        tg.message("and tomorrow?", chat_type="supergroup", reply_to=int(sent_id or 0))
        tg.message(f"/tasks@{tg.username}", chat_type="supergroup")
        await port.wait(lambda: len(port.inbounds) == 3)
        # updates are handled in order, so the unaddressed first message was seen and ignored
        assert [i.text for i in port.inbounds] == ["what is on my calendar", "and tomorrow?", "/tasks"]


async def test_forum_topic_is_a_thread(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, port):
        tg.message(f"summarize this topic @{tg.username}", chat_type="supergroup", thread_id=42)
        tg.message(f"@{tg.username} and this one", chat_type="supergroup", thread_id=43)
        await port.wait(lambda: len(port.inbounds) == 2)
        assert [(i.text, i.thread_id) for i in port.inbounds] == [
            ("summarize this topic", "42"), ("and this one", "43")]
        await surface.deliver(item("Summary.", origin=port.inbounds[0].origin), None)
        sent = tg.sent("sendMessage")[-1].params
        assert (sent["chat_id"], sent["message_thread_id"]) == (GROUP_ID, 42)


async def test_redelivered_update_is_a_duplicate(tg: FakeBot, tmp_path: Path, unused_tcp_port: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Telegram redelivers a webhook update when it did not see the 200 (a timeout, a dropped connection)
    async with webhook(tg, tmp_path, unused_tcp_port, monkeypatch) as (_, port, post):
        update = tg.message("only once", inject=False)
        assert await post(update, SECRET) == 200
        assert await post(update, SECRET) == 200
        assert port.duplicates == [f"telegram:update:{update['update_id']}"]
        assert [i.text for i in port.inbounds] == ["only once"]


async def test_updates_pending_at_start_are_delivered(tg: FakeBot, tmp_path: Path) -> None:
    update = tg.message("sent while Anyy was down")
    async with running(tg, tmp_path) as (_, port):
        await port.wait(lambda: len(port.inbounds) == 1)
        assert port.inbounds[0].text == "sent while Anyy was down"
        await tg.wait(lambda: update["update_id"] not in tg.pending, what="confirmation")


async def test_stop_while_handling_then_restart_delivers_once(tg: FakeBot, tmp_path: Path) -> None:
    port = RecordingPort()
    port.hold = asyncio.Event()
    async with running(tg, tmp_path, port) as (surface, _):
        update = tg.message("in flight at shutdown")
        await asyncio.wait_for(port.entered.wait(), 5)
        stopping = asyncio.create_task(surface.stop())
        # polling has ended (its last getUpdates confirms only what was handled) before receive returns
        await tg.wait_calls("getUpdates", where=lambda c: c.params.get("timeout") == 0)
        port.hold.set()
        await stopping
    assert [i.text for i in port.inbounds] == ["in flight at shutdown"]
    assert update["update_id"] in tg.pending  # never acknowledged, so Telegram keeps it

    port.hold = None
    async with running(tg, tmp_path, port):
        await port.wait(lambda: len(port.duplicates) == 1)
    assert len(port.inbounds) == 1  # the redelivery was recognized: no second turn


async def test_update_not_recorded_is_not_acknowledged(tg: FakeBot, tmp_path: Path) -> None:
    port = RecordingPort()
    port.failures = 1
    async with running(tg, tmp_path, port) as (_, port):
        tg.message("the store hiccups")
        await port.wait(lambda: len(port.inbounds) == 1)  # fetched again after the failure
        assert port.inbounds[0].text == "the store hiccups"


async def test_photo_document_and_voice_are_saved(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (_, port):
        tg.photo(b"\xff\xd8 full size", caption="what is this?")
        tg.message(None, document=tg.add_file(b"%PDF", file_name="../../etc/passwd report.pdf",
                                               mime_type="application/pdf"))
        tg.message(None, voice={**tg.add_file(b"OggS voice"), "duration": 3, "mime_type": "audio/ogg"})
        await port.wait(lambda: len(port.inbounds) == 3)
    photo, document, voice = port.inbounds
    folder = tmp_path / "attachments" / "telegram" / str(OWNER_ID)
    assert photo.text == "what is this?" and document.text == "" and voice.text == ""
    saved = [(a.mime_type, a.size, Path(a.path).read_bytes()) for i in port.inbounds for a in i.attachments]
    assert saved == [("image/jpeg", 12, b"\xff\xd8 full size"), ("application/pdf", 4, b"%PDF"),
                     ("audio/ogg", 10, b"OggS voice")]
    assert all(Path(a.path).parent == folder for i in port.inbounds for a in i.attachments)
    assert document.attachments[0].name == "passwd_report.pdf"


SECRET = "s3cret-Token_1"


@contextlib.asynccontextmanager
async def webhook(tg: FakeBot, data_dir: Path, http_port: int, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[
        tuple[TelegramSurface, RecordingPort, Callable[[dict[str, object], str | None], Awaitable[int]]]]:
    """A surface in webhook mode, and `post(update, secret)` sending like Telegram does; returns the status."""
    monkeypatch.setenv("ANYY_TEST_TG_SECRET", SECRET)
    url = f"http://127.0.0.1:{http_port}/telegram/hook"
    async with running(tg, data_dir, mode="webhook", webhook_url=url, port=http_port,
                       secret_token_env="ANYY_TEST_TG_SECRET") as (surface, port), aiohttp.ClientSession() as http:

        async def post(update: dict[str, object], secret: str | None) -> int:
            headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
            async with http.post(url, json=update, headers=headers) as response:
                return response.status

        yield surface, port, post


async def test_webhook_checks_the_secret_token(tg: FakeBot, tmp_path: Path, unused_tcp_port: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    async with webhook(tg, tmp_path, unused_tcp_port, monkeypatch) as (surface, port, post):
        assert surface.status() == "up"
        assert tg.webhook == {"url": f"http://127.0.0.1:{unused_tcp_port}/telegram/hook", "secret_token": SECRET}
        update = tg.message("via webhook", inject=False)
        assert await post(update, None) == 403
        assert await post(update, "wrong") == 403
        assert port.inbounds == []
        assert await post(update, SECRET) == 200
        # the 200 only goes out once the gateway has recorded the message
        assert [i.text for i in port.inbounds] == ["via webhook"]


async def test_webhook_answers_500_when_not_recorded(tg: FakeBot, tmp_path: Path, unused_tcp_port: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    async with webhook(tg, tmp_path, unused_tcp_port, monkeypatch) as (_, port, post):
        port.failures = 1
        update = tg.message("the store hiccups", inject=False)
        assert await post(update, SECRET) == 500  # so Telegram delivers it again
        assert await post(update, SECRET) == 200
        assert [i.text for i in port.inbounds] == ["the store hiccups"]


async def test_webhook_mode_refuses_to_start_without_a_secret(tg: FakeBot, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANYY_TEST_TG_SECRET", raising=False)
    surface = TelegramSurface(tg.config(mode="webhook", webhook_url="https://example.org/tg",
                                        secret_token_env="ANYY_TEST_TG_SECRET"), tg.token, tmp_path)
    with pytest.raises(RuntimeError, match="ANYY_TEST_TG_SECRET"):
        await surface.start(RecordingPort())
    await surface.stop()
    assert tg.sent() == []


async def test_rejected_token_is_a_clear_start_error(tg: FakeBot, tmp_path: Path) -> None:
    surface = TelegramSurface(tg.config(token_env="MY_BOT_TOKEN"), "123:not-a-token-the-fake-knows", tmp_path)
    with pytest.raises(RuntimeError, match="MY_BOT_TOKEN was rejected"):
        await surface.start(RecordingPort())
    await surface.stop()
    assert surface.status() == "down"


# -- buttons ----------------------------------------------------------------------------------------


async def test_press_reaches_gateway_and_is_answered(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, port):
        prompt = int(await surface.deliver(item("Send the email?", buttons=APPROVAL), None) or 0)
        keys = tg.shown(OWNER_ID, prompt)["reply_markup"]["inline_keyboard"]
        assert [[(k["text"], k["callback_data"]) for k in row] for row in keys] == [
            [("Approve", "a:ap_7f3k"), ("Deny", "d:ap_7f3k")]]
        tg.press(prompt, "a:ap_7f3k")
        answered = await tg.wait_calls("answerCallbackQuery")
        assert port.presses == [("telegram", str(OWNER_ID), "approve", "ap_7f3k", OWNER)]
        assert answered[0].params["text"] == "Approved: it runs now."


async def test_clarify_option_is_read_from_the_keyboard(tg: FakeBot, tmp_path: Path) -> None:
    options = [Button(label=o, action="clarify", value=o) for o in ("Tuesday 10:00", "Wednesday 15:30")]
    async with running(tg, tmp_path) as (surface, port):
        prompt = int(await surface.deliver(item("Which slot?", buttons=options), None) or 0)
        tg.press(prompt, "c:1")
        tg.press(prompt, "c:9")  # no such option (any more): answered, not forwarded
        await tg.wait_calls("answerCallbackQuery", 2)
        assert [(p[2], p[3]) for p in port.presses] == [("clarify", "Wednesday 15:30")]
        assert tg.sent("answerCallbackQuery")[1].params["text"] == "This button is no longer active."


# -- typing -----------------------------------------------------------------------------------------


def typing_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("telegram-typing") and not t.done()]


async def test_typing_runs_during_a_turn_and_always_stops(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        surface.typing_interval_s = 0.01
        async with surface.progress(OWNER, None):
            await tg.wait_calls("sendChatAction", 3)  # kept alive, not sent once
        assert typing_tasks() == []
        assert tg.sent("sendChatAction")[0].params["action"] == "typing"

        with pytest.raises(ValueError):
            async with surface.progress(OWNER, None):
                await tg.wait_calls("sendChatAction", 4)
                raise ValueError("the turn failed")
        assert typing_tasks() == []

        entered = asyncio.Event()

        async def turn() -> None:
            async with surface.progress(OWNER, None):
                entered.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(turn())
        await entered.wait()
        await tg.wait_calls("sendChatAction", 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert typing_tasks() == []


async def test_typing_stops_when_the_chat_refuses_it(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        tg.fail("sendChatAction", status=403, description="Forbidden: bot was blocked by the user")
        async with surface.progress(OWNER, None):
            [task] = typing_tasks()
            await asyncio.wait_for(task, 5)  # ends by itself instead of retrying every few seconds
        assert [c.status for c in tg.sent("sendChatAction", ok=False)] == [403]
