"""Issue 12 at the platforms: the real Gateway with the Telegram surface on the fake Bot API and the Slack
surface (Socket Mode) on the fake Slack, against the fake model. What counts is what the fakes see: files
never fetched for a stranger, a group clarify tap refused, approval previews arriving verbatim."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.app import Gateway
from gateway.surfaces.slack.events import to_press
from store.artifacts import Artifacts
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.fixtures.slack import FakeSlack, is_post
from tests.support import side_effects
from tests.support.slack_events import OWNER, STRANGER, dm, event_body, mention, press_body
from tests.support.telegram_api import GROUP_ID, OWNER_ID, FakeBot

STRANGER_ID = 2002
FLATMATE_ID = 3003  # a second owner in the group: allowed, but not the one who was asked
TRICKY = "Pay here: [https://bank.example/pay](https://evil.example/pay)\n```\nafter the fence <b>&amp;</b>"


@pytest.fixture(autouse=True)
def _reset_side_effects() -> Iterator[None]:
    side_effects.reset()
    yield
    side_effects.reset()


@pytest_asyncio.fixture(loop_scope="function")
async def slack_owner_gateway(slack_gateway: Any) -> AsyncIterator[Gateway]:
    async with slack_gateway() as gw:
        yield gw


# -- defect 5: strangers fill the disk before any check -------------------------------------------------


async def test_telegram_never_fetches_a_strangers_attachments(tg: FakeBot, telegram_gateway: Any, model: FakeModel,
                                                             tmp_path: Path) -> None:
    async with telegram_gateway(telegram={"allowed_users": [OWNER_ID, FLATMATE_ID]}) as gw:
        for n in range(3):
            tg.message(None, user_id=STRANGER_ID, user_name="stranger",
                       document=tg.add_file(b"x" * 1024 * 1024, file_name=f"junk-{n}.bin"))
        pairing, *_ = await tg.wait_calls("sendMessage", count=3)  # one pairing reply per message (rate-limited)
        await gw.idle()
        assert pairing.params["chat_id"] == STRANGER_ID and "pairing code" in pairing.params["text"]
        assert tg.sent("getFile") == [] and model.requests == []
        assert not (tmp_path / "attachments").exists()
        # The owner's attachment is still fetched: the check is about who, not about files.
        model.script(reply("Got it."))
        tg.message(None, document=tg.add_file(b"%PDF", file_name="mine.pdf"))
        # The reply to the owner: the file was saved before the turn.
        await tg.wait_calls("sendMessage", where=lambda c: c.params["chat_id"] == OWNER_ID
                            and "Got it" in c.params["text"])  # not the notice of the stranger
        assert len(tg.sent("getFile")) == 1
        # the turn moved the download into the artifact store
        [saved] = await Artifacts(gw.store, gw.config.data_dir / "artifacts", max_file_bytes=1 << 30,
                                  max_daily_bytes=1 << 30).for_session(f"telegram:{OWNER_ID}")
        assert saved.name.endswith("mine.pdf") and Path(saved.path).read_bytes() == b"%PDF"


async def test_slack_never_fetches_a_strangers_files(slack_owner_gateway: Gateway, slack_fake: FakeSlack,
                                                     model: FakeModel) -> None:
    junk = slack_fake.add_file("junk.bin", b"x" * 1024 * 1024)
    event = dm("hi", user=STRANGER, subtype="file_share", files=[junk])
    envelope = await slack_fake.send_envelope("events_api", event_body(event))
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    answer = (await slack_fake.calls.wait(is_post))[0].args
    await slack_owner_gateway.idle()
    assert "pairing code" in answer["text"] and model.requests == []
    assert slack_fake.calls.items(lambda c: c.method == "files.download") == []
    mine = slack_fake.add_file("mine.txt", b"mine")
    model.script(reply("Got it."))
    await slack_fake.send_envelope("events_api", event_body(
        dm("read this", ts="1710000000.000900", subtype="file_share", files=[mine]), event_id="Ev2"))
    await slack_fake.calls.wait(lambda c: c.method == "files.download")


# -- defect 3: a clarify tap in a group answers the session that asked, by the user who was asked -------


async def test_a_group_clarify_tap_by_another_member_changes_nothing(tg: FakeBot, telegram_gateway: Any,
                                                                     model: FakeModel) -> None:
    model.script(tool_call("clarify", {"question": "Which flat meeting day?", "options": ["Monday", "Friday"]}))
    async with telegram_gateway(telegram={"allowed_users": [OWNER_ID, FLATMATE_ID]}) as gw:
        tg.message(f"@{tg.username} help me choose a day, ask me", chat_type="supergroup")
        [question] = await tg.wait_calls("sendMessage", where=lambda c: "reply_markup" in c.params)
        await gw.idle()
        with tg.lock:
            [(_, message_id)] = [key for key, m in tg.messages.items() if m.get("reply_markup")]
        asked = len(model.requests)

        tg.press(message_id, "c:0", chat_id=GROUP_ID, user_id=FLATMATE_ID, user_name="flatmate")
        [refusal] = await tg.wait_calls("answerCallbackQuery")
        await gw.idle()
        assert refusal.params["text"] == "This question was not for you; nothing changed."
        assert len(model.requests) == asked
        assert await gw.runtime.sessions.get(f"telegram:{GROUP_ID}") is None  # no bare group session
        assert await gw.runtime.sessions.get(f"telegram:{GROUP_ID}#{FLATMATE_ID}") is None

        model.script(reply("Friday it is."))
        tg.press(message_id, "c:1", chat_id=GROUP_ID)
        await tg.wait_calls("answerCallbackQuery", count=2)
        await tg.wait_calls("sendMessage", count=2)
        await gw.idle()
        assert len(model.requests) == asked + 1
        assert model.requests[-1].said[-1] == {"role": "user", "content": "Friday"}
        rows = await gw.runtime.messages.recent(f"telegram:{GROUP_ID}#{OWNER_ID}", 0, 10)
        assert [r.content for r in rows if r.role == "user"][-1] == "Friday"
        assert question.params["chat_id"] == GROUP_ID


async def test_a_slack_channel_clarify_tap_by_another_member_changes_nothing(slack_gateway: Any,
                                                                             slack_fake: FakeSlack,
                                                                             model: FakeModel) -> None:
    flatmate = "UFLATMATE"  # a second owner in the channel: allowed, but not the one who was asked
    model.script(tool_call("clarify", {"question": "Which flat meeting day?", "options": ["Monday", "Friday"]}))
    async with slack_gateway(slack={"allowed_users": [OWNER, flatmate]}) as gw:
        await slack_fake.send_envelope("events_api", event_body(mention("help me choose a day, ask me")))
        [question] = await slack_fake.calls.wait(lambda c: is_post(c) and "blocks" in c.args)
        await gw.idle()
        asked = len(model.requests)

        async def tap(user: str, option: int) -> str:
            body = press_body(user, f"anyy_clarify_{option}", ["Monday", "Friday"][option])
            body["message"]["ts"] = body["container"]["message_ts"] = question.result["ts"]
            before = len(slack_fake.calls.items(lambda c: c.method == "chat.postEphemeral"))
            await slack_fake.send_envelope("interactive", body)
            await slack_fake.calls.wait(lambda c: c.method == "chat.postEphemeral", count=before + 1)
            await gw.idle()
            shown = slack_fake.calls.items(lambda c: c.method == "chat.postEphemeral")[-1].args
            assert shown["user"] == user
            return str(shown["text"])

        assert await tap(flatmate, 0) == "This question was not for you; nothing changed."
        assert len(model.requests) == asked
        assert await gw.runtime.sessions.get(f"slack:C0001#{flatmate}") is None
        model.script(reply("Friday it is."))
        await tap(OWNER, 1)
        assert len(model.requests) == asked + 1
        assert model.requests[-1].said[-1] == {"role": "user", "content": "Friday"}
        answer = (await slack_fake.calls.wait(lambda c: is_post(c) and c.args["text"] == "Friday it is."))[0]
        assert answer.args["channel"] == "C0001"


def test_a_slack_press_says_whether_it_came_from_a_channel() -> None:
    """Slack's half of the group clarify rule: a channel press is a group press (one session per user)."""
    channel = to_press(press_body(OWNER, "anyy_clarify_0", "Friday"))
    direct = press_body(OWNER, "anyy_clarify_0", "Friday", thread_ts=None)
    direct["channel"]["id"] = direct["container"]["channel_id"] = "D0001"
    assert channel is not None and channel.is_group
    assert (pressed := to_press(direct)) is not None and not pressed.is_group


# -- defect 6: approval previews are verbatim -----------------------------------------------------------


async def test_a_telegram_approval_prompt_shows_links_and_fences_verbatim(tg: FakeBot, telegram_gateway: Any,
                                                                          model: FakeModel) -> None:
    model.script(tool_call("side_effect", {"note": TRICKY}), reply("Asked."))
    async with telegram_gateway(telegram={"allowed_users": [OWNER_ID, FLATMATE_ID]}) as gw:
        tg.message("please do the side effect")
        [prompt] = await tg.wait_calls("sendMessage", where=lambda c: "reply_markup" in c.params)
        await gw.idle()
        text = prompt.params["text"]
        assert prompt.params["parse_mode"] == "HTML"
        assert text.startswith("<pre>") and text.endswith("</pre>") and text.count("<pre>") == 1
        assert html.escape(f"Record the note: {TRICKY}") in text and "<a " not in text
        with tg.lock:
            shown = next(m["text"] for m in tg.messages.values() if m.get("reply_markup"))
        assert f"Record the note: {TRICKY}\n\nExpires" in shown  # what the phone shows, character for character


async def test_a_slack_approval_prompt_shows_links_and_fences_verbatim(
        slack_owner_gateway: Gateway, slack_fake: FakeSlack, model: FakeModel) -> None:
    model.script(tool_call("side_effect", {"note": TRICKY}), reply("Asked."))
    await slack_fake.send_envelope("events_api", event_body(dm("please do the side effect")))
    [prompt] = await slack_fake.calls.wait(lambda c: is_post(c) and "blocks" in c.args and
                                           len(c.args["blocks"]) > 1)
    await slack_owner_gateway.idle()
    section = prompt.args["blocks"][0]["text"]
    assert section["type"] == "plain_text" and f"Record the note: {TRICKY}\n\nExpires" in section["text"]
    fallback = prompt.args["text"]
    assert "<https://" not in fallback and "&lt;b&gt;" in fallback and "[https://bank.example/pay]" in fallback
