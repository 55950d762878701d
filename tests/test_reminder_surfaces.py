"""A trigger's reminder line on each platform: outside text (an email subject) reads exactly as written,
with no link, formatting or mention made of it, on the fake Telegram, the fake Slack and the console."""

from __future__ import annotations

import html
import itertools
import re
from typing import Any

import pytest

from gateway.surfaces.markdown_source import as_source
from store.records import Origin
from store.triggers import TriggerEvent
from tests.fixtures.slack import FakeSlack, is_post
from tests.support import telegram_wire
from tests.support.slack_events import OWNER
from tests.support.telegram_api import OWNER_ID, FakeBot
from toolsets.registry import TOOLSETS
from toolsets.schedule import Reminder, parse_schedule

SUBJECT = ("[Verify](https://evil.example) <https://x.example> *now* _soon_ ~gone~ `code` **big** "
           "<@UOWNER> <!channel> snake_case 2*3*4 C:\\temp &amp; # x")
SENDER = "Ann <ann@bank.example>"
SEEN = f"📧 {SENDER}: {SUBJECT}"  # the default line, as the person should read it


def _mail(n: int) -> TriggerEvent:
    return TriggerEvent(key=f"mail:personal:INBOX:7:{n}", kind="email", source="email from ann@bank.example",
                        fields={"from": SENDER, "subject": SUBJECT, "folder": "INBOX"}, text="body")


async def _fire(gw: Any, user_key: str, origin: Origin) -> None:
    service = gw.services["automations"]
    rec = await service.create(user_key, origin, "bank mail", parse_schedule({"type": "email"}),
                               Reminder(kind="reminder"))
    assert await service.fire_event(rec.id, _mail(1)) is True


async def test_telegram_shows_the_outside_text_as_written(tg: FakeBot, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        await _fire(gw, f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID)))
        [call] = await tg.wait_calls("sendMessage")
    sent = call.params
    assert sent["parse_mode"] == "HTML"
    assert telegram_wire.visible_text(sent["text"]) == SEEN
    assert "<" not in sent["text"].replace("&lt;", "")  # no tag at all: no link, bold or code of its own


# Slack's mrkdwn marks: one opens after a word boundary and before a non-space, and closes after a
# non-space and before a word boundary (marks inside a word are text).
_MARKED = {mark: re.compile(rf"(?<![^\W_]){re.escape(mark)}(?=\S).*?(?<=\S){re.escape(mark)}(?![^\W_])")
           for mark in "*_~`"}


def _slack_formats(mrkdwn: str) -> list[str]:
    """Spans Slack would format or link in `mrkdwn`, whether it reads a zero-width space as a space or as
    a letter (it documents neither, so the guard must hold both ways)."""
    found = re.findall(r"<[^>]*>", mrkdwn)  # links, mentions, <!channel>
    for zwsp in (" ", "a"):
        text = mrkdwn.replace("\u200b", zwsp)
        found += [m[0] for pattern in _MARKED.values() for m in pattern.finditer(text)]
    return found


async def test_slack_shows_the_outside_text_as_written(slack_fake: FakeSlack, slack_gateway: Any) -> None:
    async with slack_gateway() as gw:
        await _fire(gw, f"slack:{OWNER}", Origin(surface="slack", chat_id="D0001"))
        await slack_fake.calls.wait(is_post)
    [posted] = slack_fake.posted()
    mrkdwn = posted["text"]
    assert posted.get("blocks") in (None, "", "[]")
    assert _slack_formats(mrkdwn) == []
    assert html.unescape(mrkdwn.replace("\u200b", "")) == SEEN


async def test_the_console_prints_the_outside_text_without_backslashes(start_console: Any) -> None:
    console = await start_console(toolsets=TOOLSETS)
    await _fire(console.gw, "console:owner", Origin(surface="console", chat_id="local"))
    assert await console.wait_for(SEEN + "\n")


@pytest.mark.parametrize("mrkdwn", ["*now*", "_soon_", "~gone~", "`code`", "a *b* c", "<!channel>"])
def test_the_slack_check_sees_formatting(mrkdwn: str) -> None:
    assert _slack_formats(mrkdwn)  # the check above is not vacuous


def test_the_console_source_keeps_markup_and_unescapes_text() -> None:
    for source in ("**bold** _it_ `` `x` `` ~~s~~", "1. a\n   - b\n2. c", "Intro:\n-", "```py\nx = 1\n```\n\nok",
                   "> q\n> r", "a <https://x.y> <a@b.c> [l](http://q)", "| a | b |\n|---|---|\n| 1 | 2 |",
                   "# H\n\ntext\n\n---\n\nend", "    indented\n    code"):
        assert as_source(source) == source
    assert as_source("Tea \\& \\*x\\* `a\\*b`") == "Tea & *x* `a\\*b`"  # code keeps its backslashes
    # A reply streamed into the console grows at its end while its markup is still open.
    reply = "Intro:\n- **bold** and `code`\n\n```py\nx = 1\n```"
    shown = [as_source(reply[:n]) for n in range(1, len(reply) + 1)]
    assert sum(not b.startswith(a) for a, b in itertools.pairwise(shown)) <= 1
