"""Issue 41's audit, budgets under bursts: a burst of trigger firings cannot overspend a cap (prompt runs of
one automation go one at a time and each checks the budget when it starts), and each firing of a trigger
starts on fresh history, so one event's outside content never rides into the next firing's request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.surfaces.console import CHAT_ID
from store.records import AutomationRecord, Origin
from tests.fixtures.gateway import ConsoleHarness
from tests.fixtures.model import FakeModel, reply
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
