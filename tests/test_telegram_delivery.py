"""The Telegram surface sending: Markdown rendered as Telegram HTML, long texts split, edits, and Bot API
failures mapped to transient or permanent delivery errors, against the fake Bot API."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.surfaces.base import DeliveryError
from gateway.surfaces.telegram.format import to_html
from store.records import Button
from tests.support import telegram_wire as wire
from tests.support.telegram_api import OWNER_ID, FakeBot
from tests.support.telegram_port import APPROVAL, item, running

# -- sending ----------------------------------------------------------------------------------------


async def test_markdown_is_rendered_as_telegram_html(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        message_id = await surface.deliver(item("**Total:** 3 < 5 & `a<b` [docs](https://x.org/?a=1&b=2)"), None)
        call = tg.sent("sendMessage")[0].params
        assert call["parse_mode"] == "HTML"
        assert call["text"] == ('<b>Total:</b> 3 &lt; 5 &amp; <code>a&lt;b</code> '
                                '<a href="https://x.org/?a=1&amp;b=2">docs</a>')
        assert tg.shown(OWNER_ID, int(message_id or 0))["text"] == "Total: 3 < 5 & a<b docs"


async def test_reply_to_a_message(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        await surface.deliver(item("Done.", reply_to="512"), None)
        assert tg.sent("sendMessage")[0].params["reply_parameters"] == {
            "message_id": 512, "allow_sending_without_reply": True}


async def test_long_reply_is_split_with_buttons_on_the_last_part(tg: FakeBot, tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(20)]  # ~15 000 characters
    async with running(tg, tmp_path) as (surface, _):
        last = await surface.deliver(item("\n\n".join(paragraphs), buttons=APPROVAL), None)
        sent = tg.sent("sendMessage")
        assert len(sent) == 4
        texts = [tg.shown(OWNER_ID, int(m))["text"] for m in sorted(k[1] for k in tg.messages if k[0] == OWNER_ID)]
        assert all(len(t) <= 4096 for t in texts)
        assert " ".join(" ".join(texts).split()) == " ".join(" ".join(paragraphs).split())
        assert [("reply_markup" in c.params) for c in sent] == [False, False, False, True]
        assert last == str(max(k[1] for k in tg.messages if k[0] == OWNER_ID))


async def test_flood_control_is_a_transient_failure_then_delivers_once(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        tg.fail("sendMessage", status=429, retry_after=7)
        with pytest.raises(DeliveryError) as failure:
            await surface.deliver(item("hello"), None)
        assert (failure.value.transient, failure.value.retry_after) == (True, 7.0)
        assert await surface.deliver(item("hello"), None)  # the dispatcher's retry
        assert [c.params["text"] for c in tg.sent("sendMessage")] == ["hello"]


async def test_retry_of_a_split_message_sends_only_the_rest(tg: FakeBot, tmp_path: Path) -> None:
    text = "\n\n".join(f"Part {n} " + "x " * 2000 for n in range(3))
    async with running(tg, tmp_path) as (surface, _):
        tg.fail("sendMessage", after=1, status=502, description="Bad Gateway")
        with pytest.raises(DeliveryError) as failure:
            await surface.deliver(item(text), None)
        assert failure.value.transient
        await surface.deliver(item(text), None)
        starts = [c.params["text"][:6] for c in tg.sent("sendMessage")]
        assert starts == ["Part 0", "Part 1", "Part 2"]


async def test_rejected_formatting_falls_back_to_plain_text(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        tg.fail("sendMessage", status=400)  # "can't parse entities"
        message_id = await surface.deliver(item("**bold** claim"), None)
        calls = tg.sent("sendMessage", ok=False)
        assert [(c.ok, c.params.get("parse_mode")) for c in calls] == [(False, "HTML"), (True, None)]
        assert tg.shown(OWNER_ID, int(message_id or 0))["text"] == "**bold** claim"


async def test_other_bad_request_is_permanent(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        tg.fail("sendMessage", status=400, description="Bad Request: chat not found")
        with pytest.raises(DeliveryError) as failure:
            await surface.deliver(item("hello"), None)
        assert failure.value.transient is False


async def test_edit_without_buttons_removes_them(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        prompt = await surface.deliver(item("Send the email?", buttons=APPROVAL), None)
        edited = await surface.deliver(item("Send the email? **Approved** by owner.", item_id=2, edit_of=1), prompt)
        assert edited == prompt
        shown = tg.shown(OWNER_ID, int(prompt or 0))
        assert shown["text"] == "Send the email? Approved by owner."
        assert "reply_markup" not in shown
        # the same edit again (a retried delivery) is not an error
        assert await surface.deliver(item("Send the email? **Approved** by owner.", item_id=2, edit_of=1),
                                     prompt) == prompt


async def test_button_value_too_long_for_telegram_is_a_permanent_failure(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        buttons = [Button(label="Approve", action="approve", value="x" * 80)]
        with pytest.raises(DeliveryError) as failure:
            await surface.deliver(item("Approve?", buttons=buttons), None)
        assert failure.value.transient is False
        assert tg.sent("sendMessage") == []


@pytest.mark.parametrize(("markdown", "visible"), [
    ("# Plan\n- **first** step\n* _second_ step", "Plan\n• first step\n• second step"),
    ("snake_case_name and 2 * 3 * 4 and a ** b", "snake_case_name and 2 * 3 * 4 and a ** b"),
    ("**unclosed bold and `code with **stars**`", "**unclosed bold and code with **stars**"),
    ("```python\nif a < b and c > d: print('&')\n```", "if a < b and c > d: print('&')"),
    ("```\nunclosed fence <tag>", "```\nunclosed fence <tag>"),  # plain text until the fence closes
    ("> quoted **text**\n> more\nafter", "quoted text\nmore\nafter"),
    ("[label](javascript:alert(1)) and [ok](https://a.example/\"x\")", "[label](javascript:alert(1)) and ok"),
    ("***both*** ~~gone~~ ---", "both gone ---"),
])
def test_html_rendering_is_valid_telegram_html(markdown: str, visible: str) -> None:
    assert wire.visible_text(to_html(markdown)) == visible


async def test_delivery_after_stop_waits_for_the_next_start(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):
        pass
    with pytest.raises(DeliveryError) as failure:
        await surface.deliver(item("a reply finished during shutdown"), None)
    assert failure.value.transient  # the outbox row stays pending
    assert tg.sent("sendMessage") == []
