"""Issue 41, budgets: `[budget]` caps summed from the usage rows (the fake model reports usage), the 80 %
notice once per owner, refused chat turns with an owner-only **Allow today**, automations skipped for budget
while reminders still arrive, /usage and the dashboard home showing the same sums, and caps that hold across
a restart and across two residents on one store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.config import parse_config
from gateway.services.budget import Budget
from gateway.services.usage import summary
from gateway.surfaces.console import CHAT_ID
from store.access import AccessRepo
from store.records import Inbound, Origin, Outbound, iso
from store.usage import UsageRepo
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.telegram_api import OWNER_ID, FakeBot
from toolsets.schedule import parse_action, parse_schedule

GUEST_ID = 3003
OWNER_KEY = f"telegram:{OWNER_ID}"


def sent_to(tg: FakeBot, chat: int) -> list[Any]:
    return [c for c in tg.sent("sendMessage") if int(c.params["chat_id"]) == chat]


async def test_a_chat_turn_over_the_cap_gets_a_notice_and_only_an_owner_allows_today(
        tg: FakeBot, telegram_gateway: Any, model: FakeModel) -> None:
    async with telegram_gateway(budget={"daily": 1000}) as gw:
        model.script(reply("first", usage=(700, 100)), reply("second", usage=(300, 50)))
        tg.message("one")
        await tg.wait_calls("sendMessage", where=lambda c: c.params.get("text") == "first")
        await gw.idle()
        tg.message("two")  # 800 of 1000 spent: the owner hears of 80 %, the turn runs
        await tg.wait_calls("sendMessage", where=lambda c: c.params.get("text") == "second")
        await gw.idle()
        asked = len(model.requests)
        tg.message("three")  # 1150 of 1000: refused, no model call
        tg.message("four")
        await tg.wait(lambda: len([c for c in sent_to(tg, OWNER_ID) if "not calling the model" in c.params["text"]])
                      == 2, what="two refusals")
        await gw.idle()
        assert len(model.requests) == asked
        texts = [c.params["text"] for c in sent_to(tg, OWNER_ID)]
        assert len([t for t in texts if "at 80%" in t]) == 1, texts  # once, though checked three times
        assert len([t for t in texts if "is used up (1,150 tokens of 1,000 tokens). Automations" in t]) == 1, texts
        refusal = [c for c in sent_to(tg, OWNER_ID) if "not calling the model" in c.params["text"]][-1]
        assert "Allow today" in str(refusal.params.get("reply_markup"))
        day = gw.services["budget"].today().isoformat()
        with tg.lock:
            message_id = max(m for (chat, m), body in tg.messages.items()
                             if chat == OWNER_ID and "not calling the model" in str(body.get("text")))

        # A paired guest pressing the button changes nothing.
        await gw.receive(Inbound(surface="telegram", chat_id=str(GUEST_ID), user_id=str(GUEST_ID), text="hi"))
        await gw.idle()
        code = await AccessRepo(gw.store).current_code("telegram", str(GUEST_ID))
        assert code is not None and await AccessRepo(gw.store).redeem("telegram", code.code) is not None
        tg.press(message_id, f"b:{day}", user_id=GUEST_ID, user_name="guest")
        [answer] = await tg.wait_calls("answerCallbackQuery")
        assert answer.params["text"] == "Only an owner can raise the budget; nothing changed."
        assert not await gw.services["budget"].allowances.granted(day)

        tg.press(message_id, f"b:{day}")
        answers = await tg.wait_calls("answerCallbackQuery", count=2)
        assert answers[-1].params["text"] == "Today's caps are raised; send your message again."
        model.script(reply("five", usage=(10, 10)))
        tg.message("five")
        await tg.wait_calls("sendMessage", where=lambda c: c.params.get("text") == "five")
        tg.press(message_id, f"b:{day}")
        answers = await tg.wait_calls("answerCallbackQuery", count=3)
        assert answers[-1].params["text"] == "Today's caps were raised already; they are raised once a day."


async def test_at_the_cap_a_prompt_automation_is_skipped_and_a_reminder_still_delivers(
        start_console: Any, make_config: Any, model: FakeModel) -> None:
    h = await start_console(make_config(budget={"daily": 100}))
    model.script(reply("spent", usage=(90, 20)))
    await h.say("spend")
    automations = h.gw.services["automations"]
    origin = Origin(surface="console", chat_id=CHAT_ID)
    user = f"console:{h.gw.config.console.user_id}"
    every = parse_schedule({"type": "every", "mode": "interval", "interval": "1d"})
    prompt = await automations.create(user, origin, "digest", every,
                                      parse_action({"kind": "prompt", "prompt": "summarise the news"}))
    nudge = await automations.create(user, origin, "stretch", every, parse_action({"kind": "reminder",
                                                                                    "text": "stretch"}))
    asked = len(model.requests)
    run = await automations.run_now(user, prompt.id)
    assert run.output is not None and "“digest” was skipped for budget" in run.output
    assert "110 tokens of 100 tokens" in run.output
    assert len(model.requests) == asked  # no model call
    run = await automations.run_now(user, nudge.id)
    assert run.output == "⏰ stretch"
    await h.gw.idle()
    out = h.new_output()
    assert "skipped for budget" in out and "⏰ stretch" in out


async def test_per_run_bounds_one_automation_turn(start_console: Any, make_config: Any, model: FakeModel) -> None:
    h = await start_console(make_config(budget={"per_run": 500}))
    automations = h.gw.services["automations"]
    user = f"console:{h.gw.config.console.user_id}"
    rec = await automations.create(user, Origin(surface="console", chat_id=CHAT_ID), "loop",
                                   parse_schedule({"type": "every", "mode": "interval", "interval": "1d"}),
                                   parse_action({"kind": "prompt", "prompt": "look things up"}))
    model.script(tool_call("memory_list", {}, usage=(400, 200)), reply("never asked"))
    run = await automations.run_now(user, rec.id)
    assert run.output is not None and "I stopped after using 600 tokens (the limit is 500)" in run.output
    assert model.remaining == 1  # the second call was never made


async def test_usage_and_the_dashboard_show_the_caps_as_the_usage_rows_sum_them(
        dashboard_config: Any, start_console: Any, start_dashboard: Any, model: FakeModel) -> None:
    config = dashboard_config(budget={"daily": 0.5, "monthly": 10, "per_user_daily": 0.1, "per_run": 0.05},
                              model={"price_in_per_mtok": 3.0, "price_out_per_mtok": 15.0})
    h = await start_console(config)
    model.script(reply("a", usage=(12_000, 3_000)), reply("b", usage=(20_000, 1_000)))
    await h.say("one")
    await h.say("two")
    day_start = iso(h.gw.services["budget"]._now().replace(hour=0, minute=0, second=0, microsecond=0))
    rows = await UsageRepo(h.gw.store).totals(since=day_start)
    spent = summary(rows, config.model)["total"]["cost"]
    assert spent == pytest.approx((32_000 * 3 + 4_000 * 15) / 1e6)  # what the fake model reported
    out = await h.say("/usage")
    assert f"Budget daily: {spent:.4f} of 0.5000 spent, {0.5 - spent:.4f} left" in out
    assert f"Budget monthly: {spent:.4f} of 10.0000 spent, {10 - spent:.4f} left" in out
    assert "Budget per guest per day: 0.1000" in out and "Budget per automation run: 0.0500" in out
    d = await start_dashboard(h)
    client = await d.login()
    home = await d.page(client, "/dashboard/")
    shown = re.findall(r"<li>(Budget [^<]*)</li>", home)
    assert f"Budget daily: {spent:.4f} of 0.5000 spent, {0.5 - spent:.4f} left" in shown
    assert len(shown) == 4
    await client.close()


@pytest.mark.both_backends
async def test_caps_hold_across_a_restart_and_across_two_residents_on_one_store(
        start_console: Any, make_config: Any, model: FakeModel) -> None:
    config = make_config(budget={"daily": 1000})
    first = await start_console(config)
    model.script(reply("big", usage=(900, 200)))
    assert "big" in await first.say("spend it")
    second = await start_console(config)  # another resident on the same database
    asked = len(model.requests)
    assert "not calling the model" in await second.say("and now?")
    await first.gw.stop()
    again = await start_console(config)  # a restart
    assert "not calling the model" in await again.say("still?")
    assert len(model.requests) == asked
    await second.gw.stop()
    await again.gw.stop()


async def test_a_guest_over_per_user_daily_is_refused_without_a_button_while_the_owner_still_chats(
        tg: FakeBot, telegram_gateway: Any, model: FakeModel) -> None:
    async with telegram_gateway(budget={"per_user_daily": 100}) as gw:
        tg.message("hi, I'm the flatmate", user_id=GUEST_ID, user_name="guest")
        await tg.wait(lambda: sent_to(tg, GUEST_ID), what="the pairing answer")
        await gw.idle()
        code = await AccessRepo(gw.store).current_code("telegram", str(GUEST_ID))
        assert code is not None and await AccessRepo(gw.store).redeem("telegram", code.code) is not None
        model.script(reply("guest answer", usage=(90, 20)))
        tg.message("what's up?", user_id=GUEST_ID, user_name="guest")
        await tg.wait_calls("sendMessage", where=lambda c: c.params.get("text") == "guest answer")
        await gw.idle()
        asked = len(model.requests)
        tg.message("and now?", user_id=GUEST_ID, user_name="guest")
        [refusal] = await tg.wait_calls("sendMessage", where=lambda c: "not calling the model" in c.params["text"])
        assert int(refusal.params["chat_id"]) == GUEST_ID and "The owner can raise it." in refusal.params["text"]
        assert "reply_markup" not in refusal.params  # no Allow today for a guest
        assert len(model.requests) == asked
        await tg.wait(lambda: [c for c in sent_to(tg, OWNER_ID)
                               if f"daily budget of telegram:{GUEST_ID} is used up" in c.params["text"]],
                      what="the owner told")
        model.script(reply("owner answer", usage=(500, 50)))  # the owner's own turns are not a guest's cap
        tg.message("hello")
        await tg.wait_calls("sendMessage", where=lambda c: c.params.get("text") == "owner answer")


@pytest.mark.both_backends
async def test_the_month_sums_earlier_days_once_a_day_and_today_at_every_check(store: Any) -> None:
    # A check reads today's rows, not the whole month's: its cost is one day's usage however late in the month.
    config = parse_config({"runtime": {"timezone": "Asia/Kolkata"}, "budget": {"monthly": 10_000, "daily": 5_000}})
    tz = ZoneInfo("Asia/Kolkata")  # +05:30: a local day that is not a UTC day
    clock = [datetime(2026, 12, 9, 12, 0, tzinfo=tz)]

    async def spend(at: datetime, tokens: int) -> None:
        meta = json.dumps({"model": "m", "usage": {"input_tokens": tokens, "output_tokens": 0, "cached_tokens": 0}})

        def op(db: Any) -> None:
            db.execute("INSERT INTO sessions (id, surface, chat_id, user_key, kind, epoch, created_at, updated_at)"
                       " VALUES ('s', 'telegram', '1', 'telegram:1', 'chat', 0, ?, ?) ON CONFLICT (id) DO NOTHING",
                       [iso(at), iso(at)])
            db.execute("INSERT INTO messages (session_id, epoch, turn_id, role, content, user_key, meta, created_at)"
                       " VALUES ('s', 0, ?, 'assistant', 'hi', 'telegram:1', ?, ?)", [iso(at), meta, iso(at)])

        await store.write(op)

    async def enqueue(outbound: Outbound, key: str) -> int:
        return 0

    budget = Budget(store, config, enqueue, now=lambda: clock[0])

    async def month_and_day() -> tuple[float, float]:
        caps = {cap.name: cap.spent for cap in await budget.caps()}
        return caps["monthly"], caps["daily"]

    await spend(datetime(2026, 11, 30, 23, 0, tzinfo=tz), 7)  # last month: not this month's
    await spend(datetime(2026, 12, 1, 0, 10, tzinfo=tz), 100)  # 18:40 UTC on Nov 30, but Dec 1 here
    await spend(datetime(2026, 12, 8, 23, 50, tzinfo=tz), 200)
    await spend(datetime(2026, 12, 9, 0, 20, tzinfo=tz), 30)
    assert await month_and_day() == (330, 30)
    await spend(datetime(2026, 12, 9, 11, 0, tzinfo=tz), 5)  # today's rows count at every check
    assert await month_and_day() == (335, 35)

    # Just after midnight the day before is summed from its rows (a resident may still be writing them) ...
    clock[0] = datetime(2026, 12, 10, 0, 2, tzinfo=tz)
    assert await month_and_day() == (335, 0)
    await spend(datetime(2026, 12, 9, 23, 59, tzinfo=tz), 40)  # written late, dated yesterday
    assert await month_and_day() == (375, 0)
    # ... and once it has settled, the earlier days are summed once and kept, while today's keep counting.
    clock[0] = datetime(2026, 12, 10, 9, 0, tzinfo=tz)
    assert await month_and_day() == (375, 0)
    await spend(datetime(2026, 12, 10, 8, 0, tzinfo=tz), 1)
    assert await month_and_day() == (376, 1)
    await spend(datetime(2026, 12, 5, 8, 0, tzinfo=tz), 1000)  # (no row is dated back: it shows the reading)
    assert await month_and_day() == (376, 1)  # the earlier days were not read again today
    clock[0] = datetime(2027, 1, 1, 9, 0, tzinfo=tz)  # a new month starts from nothing
    assert await month_and_day() == (0, 0)
