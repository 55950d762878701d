"""Issue 41's audit of the budget: a burst of trigger firings cannot overspend a cap (prompt runs of one
automation go one at a time and each checks the budget when it starts); each firing of a trigger starts on
fresh history, so one event's outside content never rides into the next firing's request; a used-up cap
also stops approval follow-ups and history summaries; a console-only owner hears of 80 % and 100 %."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.surfaces.console import CHAT_ID
from store.approvals import Approvals
from store.records import AutomationRecord, Origin
from tests.fixtures.gateway import ConsoleHarness
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support import side_effects
from tests.support.side_effects import EXECUTED, TESTING
from toolsets.registry import TOOLSETS
from toolsets.schedule import parse_action, parse_schedule

BURST = 20


async def webhook_prompt(h: ConsoleHarness, prompt: str) -> tuple[AutomationRecord, str, str]:
    """A webhook automation with a prompt action: (the row, its user key, its secret)."""
    user = f"console:{h.gw.config.console.user_id}"
    rec = await h.gw.services["automations"].create(
        user, Origin(surface="console", chat_id=CHAT_ID), "ci", parse_schedule({"type": "webhook", "name": "ci"}),
        parse_action({"kind": "prompt", "prompt": prompt}))
    return rec, user, await h.gw.services["webhooks"].issue(rec.id)


async def post(h: ConsoleHarness, secret: str, delivery: str, body: str) -> int:
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": delivery}
    return int(await h.gw.services["webhooks"].accept("ci", headers, body.encode()))


@pytest.mark.both_backends
async def test_a_burst_of_webhook_firings_calls_the_model_only_until_the_daily_cap(
        start_console: Any, make_config: Any, model: FakeModel) -> None:
    h = await start_console(make_config(budget={"daily": 300}))
    model.responder = lambda body: reply("build summarised", usage=(100, 10))
    rec, user, secret = await webhook_prompt(h, "Summarise this build.")
    verdicts = await asyncio.gather(*(post(h, secret, f"d-{i}", f"build {i} failed") for i in range(BURST)))
    assert verdicts == [202] * BURST
    await h.gw.idle()
    # 0, 110 and 220 tokens spent are under 300 when runs 1-3 start; from 330 on every run is skipped.
    assert len(model.requests) == 3
    runs = await h.gw.services["automations"].history(user, rec.id, limit=2 * BURST)
    assert len(runs) == BURST and {r.status for r in runs} == {"delivered"}
    outputs = [r.output or "" for r in runs]
    assert outputs.count("build summarised") == 3
    assert len([o for o in outputs if "“ci” was skipped for budget" in o]) == BURST - 3
    out = h.new_output()  # each firing answered once
    assert out.count("build summarised") == 3 and out.count("skipped for budget") == BURST - 3


async def test_each_trigger_firing_starts_on_fresh_history(start_console: Any, model: FakeModel) -> None:
    h = await start_console()
    model.responder = lambda body: reply("noted")
    _, _, secret = await webhook_prompt(h, "Summarise this build.")
    assert await post(h, secret, "d-1", "first event: deploy of alpha failed") == 202
    await h.gw.idle()
    assert await post(h, secret, "d-2", "second event: deploy of beta passed") == 202
    await h.gw.idle()
    first, second = (json.dumps(r.body) for r in model.requests)
    assert "alpha failed" in first
    assert "beta passed" in second and "alpha failed" not in second
    assert await post(h, secret, "d-2", "second event: deploy of beta passed") == 202  # a redelivery: no run
    await h.gw.idle()
    assert len(model.requests) == 2


async def test_over_the_cap_an_approvals_follow_up_tells_the_owner_in_words_and_calls_no_model(
        start_console: Any, make_config: Any, model: FakeModel) -> None:
    side_effects.reset()
    h = await start_console(make_config(budget={"daily": 100}), toolsets=[*TOOLSETS, TESTING])
    model.script(tool_call("side_effect", {"note": "n1"}, usage=(90, 20)), reply("I asked for approval.", usage=(5, 5)))
    assert "Approval needed: side_effect" in await h.say("please do the side effect")
    [held] = await Approvals(h.gw.store).list(("pending",))
    asked = len(model.requests)
    out = await h.say(f"/approve {held.id}")  # 120 of 100 spent: the follow-up is told, not run
    assert EXECUTED == ["n1"]
    assert len(model.requests) == asked
    assert f"Approval {held.id} for side_effect was approved" in out
    assert "Today's budget is used up (120 tokens of 100 tokens), so I am not calling the model to follow up" in out
    events = await h.gw.store.run(lambda db: [r["content"] for r in db.execute_returning_dicts(
        "SELECT content FROM messages WHERE role = 'event'")])
    assert [e for e in events if e.startswith(f"Approval {held.id} for side_effect was approved")]  # kept
    budget = h.gw.services["budget"]
    await budget.allowances.grant(budget.today().isoformat(), "console:owner")  # Allow today: 200 tokens
    model.script(reply("It ran."))
    assert "It ran." in await h.say("did it run?")
    said = [str(m.get("content")) for m in model.requests[-1].said]  # the outcome is in the next turn's view
    assert any(f"[event] Approval {held.id} for side_effect was approved" in m for m in said)
    side_effects.reset()


async def test_over_the_cap_no_summary_is_asked_for(start_console: Any, make_config: Any, model: FakeModel) -> None:
    h = await start_console(make_config(budget={"daily": 100}))
    model.script(reply("milk noted", usage=(40, 10)), reply("eggs noted", usage=(40, 20)))
    await h.say("buy milk")
    await h.say("and eggs")  # 110 of 100 spent from here on
    asked = len(model.requests)
    assert "The budget is used up, so I am not calling the model to summarise" in await h.say("/compact")
    session = await h.gw.runtime.sessions.get(f"console:{CHAT_ID}")
    assert session is not None
    assert await h.gw.runtime.compactor.compact(session, force=True) == 0  # the after-reply path's call
    assert len(model.requests) == asked


async def test_an_owner_who_only_uses_the_console_hears_of_80_and_100_percent(
        start_console: Any, make_config: Any, model: FakeModel) -> None:
    h = await start_console(make_config(budget={"daily": 100}))
    model.script(reply("one", usage=(80, 5)), reply("two", usage=(20, 5)))
    await h.say("one")
    out = await h.say("two")  # checked at 85 of 100
    assert "💰 Today's budget is at 85%: 85 tokens of 100 tokens." in out
    out = await h.say("three")  # 110 of 100: refused, and the owner told once
    assert "💰 Today's budget is used up (110 tokens of 100 tokens). Automations skip" in out
    assert "not calling the model" in out
