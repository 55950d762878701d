"""Issue 41, the morning briefing: `/briefing 7:30` makes one daily prompt automation, setting it again moves
it, `/briefing off` removes it; the model's `automation_briefing` does the same; the prompt asks only for
what the configured tools can read."""

from __future__ import annotations

from typing import Any

from tests.fixtures.model import FakeModel, reply, tool_call
from toolsets.briefing import NAME, briefing_prompt, parse_time


async def briefings(h: Any) -> list[Any]:
    user = f"console:{h.gw.config.console.user_id}"
    return [r for r in await h.gw.services["automations"].list(user) if r.name == NAME]


async def test_briefing_command_sets_moves_and_removes_one_daily_prompt_automation(console: Any,
                                                                                    model: FakeModel) -> None:
    assert "Morning briefing set for 07:30 every day (tasks)." in await console.say("/briefing 7:30")
    [rec] = await briefings(console)
    assert rec.schedule["cron"] == "30 7 * * *" and rec.action["kind"] == "prompt"
    assert "due today or overdue" in rec.action["prompt"]
    assert "calendar" not in rec.action["prompt"] and "email" not in rec.action["prompt"]  # none configured
    assert "moved to 18:05" in await console.say("/briefing 6:05pm")
    [moved] = await briefings(console)
    assert moved.id == rec.id and moved.schedule["cron"] == "5 18 * * *"
    assert "is not a time of day" in await console.say("/briefing 25:00")
    assert "Usage: /briefing 7:30" in await console.say("/briefing")

    run = await console.gw.services["automations"].run_now(rec.user_key, rec.id)  # what it does when it fires
    assert "Write my morning briefing" in model.requests[-1].messages[-1]["content"]
    assert run.status == "delivered"

    assert "Morning briefing turned off." in await console.say("/briefing off")
    assert await briefings(console) == []
    assert "There is no morning briefing to turn off." in await console.say("/briefing off")
    assert model.remaining == 0


async def test_the_model_sets_and_removes_the_briefing(console: Any, model: FakeModel) -> None:
    model.script(tool_call("automation_briefing", {"at": "6:45"}), reply("Done: 6:45 every morning."))
    await console.say("set up a morning briefing at 6:45 please")
    [rec] = await briefings(console)
    assert rec.schedule["cron"] == "45 6 * * *"
    assert any(m.get("role") == "tool" and "set for 06:45" in str(m.get("content"))
               for m in model.requests[-1].messages)
    model.script(tool_call("automation_briefing", {"at": "off"}), reply("Turned off."))
    await console.say("stop my morning briefing")
    assert await briefings(console) == []


def test_the_prompt_asks_only_for_configured_parts_and_times_parse() -> None:
    full = briefing_prompt(["calendar", "email", "tasks"])
    assert "today's events" in full and "unread email" in full and "due today" in full
    assert "unread email" not in briefing_prompt(["calendar", "tasks"])
    assert [parse_time(t) for t in ("7:30", "07.30", "7", "12am", "12:15pm", "23:59")] == \
        [(7, 30), (7, 30), (7, 0), (0, 0), (12, 15), (23, 59)]
