"""Telegram under load, against the fake Bot API with the real python-telegram-bot: a batch of updates is
handled side by side but in order per chat and acknowledged once handled; Telegram's flood limits are
kept by the bot (per chat, per group, per bot) and a 429 is waited out; a backlog over several chats is
answered exactly once and in order through the real Gateway. bench/telegram_load.py measures the same
at scale."""

from __future__ import annotations

import asyncio
import collections
from itertools import pairwise
from pathlib import Path
from typing import Any

from store.records import Inbound, Origin
from tests.fixtures.model import FakeModel
from tests.support.model_stream import Pace
from tests.support.telegram_api import GROUP_ID, FakeBot
from tests.support.telegram_port import RecordingPort, item, running
from tests.support.telegram_wire import visible_text

FIRST_USER = 3001
UNLIMITED = {"per_bot_per_s": 10_000, "per_chat_per_s": 10_000, "per_group_per_min": 10_000}


class SlowPort(RecordingPort):
    """Records, like the gateway, after a short while; notes which chats were being received at once."""

    def __init__(self) -> None:
        super().__init__()
        self.active: list[str] = []
        self.most_at_once = 0
        self.same_chat_at_once = False

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        self.same_chat_at_once |= inbound.chat_id in self.active
        self.active.append(inbound.chat_id)
        self.most_at_once = max(self.most_at_once, len(self.active))
        try:
            await asyncio.sleep(0.05)
            return await super().receive(inbound, dedupe_key)
        finally:
            self.active.remove(inbound.chat_id)


def chat(n: int) -> Origin:
    return Origin(surface="telegram", chat_id=str(FIRST_USER + n))


async def test_a_batch_is_handled_side_by_side_in_order_per_chat(tg: FakeBot, tmp_path: Path) -> None:
    for m in range(3):
        for c in range(4):
            tg.message(f"chat {c} message {m}", user_id=FIRST_USER + c)
    port = SlowPort()
    async with running(tg, tmp_path, port):
        await port.wait(lambda: len(port.inbounds) == 12)
        await tg.wait(lambda: not tg.pending, what="the batch to be confirmed")
    assert port.most_at_once > 1 and not port.same_chat_at_once
    per_chat = collections.defaultdict(list)
    for inbound in port.inbounds:
        per_chat[inbound.chat_id].append(inbound.text)
    assert per_chat == {str(FIRST_USER + c): [f"chat {c} message {m}" for m in range(3)] for c in range(4)}


async def test_a_batch_with_a_failed_update_is_fetched_again_and_recorded_once(tg: FakeBot, tmp_path: Path) -> None:
    for c in range(3):
        tg.message(f"message {c}", user_id=FIRST_USER + c)
    port = RecordingPort()
    port.failures = 1  # the first receive fails: the batch must not be acknowledged
    async with running(tg, tmp_path, port):
        await port.wait(lambda: len(port.inbounds) == 3)
        await tg.wait(lambda: not tg.pending, what="the batch to be confirmed")
    assert sorted(i.text for i in port.inbounds) == ["message 0", "message 1", "message 2"]
    assert len(port.duplicates) == 2  # the two handled the first time came back as no-ops


async def test_a_burst_into_one_chat_goes_out_at_one_a_second(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path) as (surface, _):  # Telegram's limits: the default
        await asyncio.gather(*(surface.deliver(item(f"reply {n}", origin=chat(0), item_id=n), None) for n in range(3)))
    sent = tg.sent("sendMessage")
    assert [visible_text(c.params["text"]) for c in sent] == ["reply 0", "reply 1", "reply 2"]
    gaps = [b.at - a.at for a, b in pairwise(sent)]
    assert min(gaps) >= 0.95, gaps


async def test_the_bot_keeps_to_its_overall_rate(tg: FakeBot, tmp_path: Path) -> None:
    rate = 10
    async with running(tg, tmp_path, limits={**UNLIMITED, "per_bot_per_s": rate}) as (surface, _):
        await asyncio.gather(*(surface.deliver(item(f"reply {n}", origin=chat(n), item_id=n), None)
                               for n in range(25)))
    at = sorted(c.at for c in tg.sent("sendMessage"))
    assert len(at) == 25
    # Evenly spaced: no burst on top of the rate, so no second holds more than `rate`. The fake sees a
    # request when it arrives, which on a busy machine can lag its send by tens of ms (one late arrival
    # shifts the spacing seen, two can share a second's edge): hence the slack, far below a burst's size.
    for k in range(1, len(at)):
        assert at[k] - at[0] >= k / rate - 0.25, (k, at[k] - at[0])
    assert max(sum(1 for t in at if s <= t < s + 1) for s in at) <= rate + 2


async def test_a_group_keeps_to_its_per_minute_limit(tg: FakeBot, tmp_path: Path) -> None:
    group = Origin(surface="telegram", chat_id=str(GROUP_ID))
    async with running(tg, tmp_path, limits={**UNLIMITED, "per_group_per_min": 1}) as (surface, _):
        await surface.deliver(item("first", origin=group), None)
        second = asyncio.create_task(surface.deliver(item("second", origin=group, item_id=2), None))
        other = await surface.deliver(item("a private chat is not held up", origin=chat(0), item_id=3), None)
        done, _ = await asyncio.wait([second], timeout=1.5)
        assert not done  # the group's next message waits for its minute
        assert other
        second.cancel()
    assert [visible_text(c.params["text"]) for c in tg.sent("sendMessage")] == ["first",
                                                                               "a private chat is not held up"]


async def test_a_429_is_waited_out_and_the_message_sent_once(tg: FakeBot, tmp_path: Path) -> None:
    async with running(tg, tmp_path, limits={**UNLIMITED, "retries": 1}) as (surface, _):
        tg.fail("sendMessage", status=429, retry_after=1)
        first = asyncio.create_task(surface.deliver(item("hello", origin=chat(0)), None))
        await tg.wait(lambda: tg.sent("sendMessage", ok=False), what="the refused send")
        await asyncio.sleep(0.3)  # the 429's answer has reached the bot
        other = asyncio.create_task(surface.deliver(item("meanwhile", origin=chat(1), item_id=2), None))
        assert await first and await other
    calls = tg.sent("sendMessage", ok=False)
    assert [c.status for c in calls] == [429, 200, 200]
    assert sorted(visible_text(c.params["text"]) for c in calls[1:]) == ["hello", "meanwhile"]  # hello once
    assert all(c.at - calls[0].at >= 0.95 for c in calls[1:])  # nothing went to a chat during retry_after


async def test_a_backlog_drains_exactly_once_in_order(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    chats, messages = 6, 3
    model.pace = Pace(first_token_s=0.05)  # turns that take a moment, so chats overlap
    for m in range(messages):  # queued while the bot was down, interleaved across chats
        for c in range(chats):
            tg.message(f"chat {c} message {m}", user_id=FIRST_USER + c, user_name=f"user{c}")
    users = [FIRST_USER + c for c in range(chats)]
    async with telegram_gateway(telegram={"allowed_users": users, "limits": UNLIMITED},
                                runtime={"stream": False}) as gw:
        await tg.wait_calls("sendMessage", chats * messages)
        await gw.idle()
        await tg.wait(lambda: not tg.pending, what="every update confirmed")
    per_chat = collections.defaultdict(list)
    for call in tg.sent("sendMessage"):
        per_chat[int(call.params["chat_id"])].append(visible_text(call.params["text"]))
    assert per_chat == {FIRST_USER + c: [f"echo: chat {c} message {m}" for m in range(messages)]
                        for c in range(chats)}
    assert len(model.requests) == chats * messages  # one turn per message, none repeated
