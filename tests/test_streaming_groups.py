"""Group throttle end to end: a reply streamed into a Telegram group (the real Gateway and
python-telegram-bot on the fake Bot API) is written no more often than the group interval, which is
longer than the private one, and ends with the complete text.

The intervals are the surface's attributes (1 s private, 3 s group in production; not in the config),
shortened here as tests/test_streaming.py does, so the test takes seconds. Slack has no group rule: its
`live()` is the same for every conversation."""

from __future__ import annotations

from typing import Any

from gateway.surfaces.telegram.format import to_html
from tests.fixtures.model import FakeModel, reply
from tests.support.model_stream import Pace
from tests.support.telegram_api import GROUP_ID, FakeBot
from tests.test_streaming import LONG, assert_throttled

PRIVATE_INTERVAL = 0.2
GROUP_INTERVAL = 0.6  # three times the private one, as in production: a private pace would fail the test


def group_shown(tg: FakeBot) -> list[str]:
    """What the group shows from the bot, oldest first."""
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == GROUP_ID and m["from"]["id"] == tg.id]


async def test_group_reply_is_edited_at_the_group_pace(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.pace = Pace(first_token_s=0.2, tokens_per_s=40)  # 100 words: 2.5 s of streaming, many chunks
    model.script(reply(LONG))
    async with telegram_gateway() as gw:
        [surface] = gw.surfaces
        surface.live_interval_s = PRIVATE_INTERVAL  # type: ignore[attr-defined]
        surface.live_group_interval_s = GROUP_INTERVAL  # type: ignore[attr-defined]
        tg.message(f"@{tg.username} explain streaming", chat_type="supergroup")
        await tg.wait(lambda: group_shown(tg) == [LONG], timeout=15, what="the final text in the group")
        await gw.idle()
    calls = [c for c in tg.sent() if c.method in ("sendMessage", "editMessageText")]
    assert {c.params["chat_id"] for c in calls} == {GROUP_ID}
    assert [c.method for c in calls].count("sendMessage") == 1 and len(calls) >= 3, [c.method for c in calls]
    assert len(calls[0].params["text"]) < len(LONG)  # the first write was a part: the reply streamed
    assert calls[-1].params["text"] == to_html(LONG)
    assert_throttled([c.at for c in calls], GROUP_INTERVAL)
