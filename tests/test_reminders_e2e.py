"""Reminders and automations through the console: /remind and the model's automation_create both arrive."""

import re
import time

from tests.fixtures.model import reply, tool_call
from tests.support.cli import anyy


async def test_remind_command_arrives_once_in_the_console(console, model):
    out = await console.say("/remind 2s hello")
    assert re.match(r"⏰ Reminder \S+ set for \d\d:\d\d \S+: hello", out), out
    delivered = await console.wait_for("⏰ hello")
    assert delivered.count("⏰ hello") == 1
    assert model.requests == []  # a reminder needs no model call
    assert (await console.say("/reminders")).startswith("No reminders.")  # a delivered one-shot is done


async def test_a_reminder_never_fires_before_its_time(console, model):
    await console.say("/remind 2s on time")
    confirmed = time.monotonic()  # after the reminder was stored, so the gap measured is at most the real one
    await console.wait_for("⏰ on time")
    assert time.monotonic() - confirmed >= 2.0


async def test_model_created_reminder_and_prompt_automation_arrive(console, model):
    now = console.gw.services["automations"].now()
    model.script(
        tool_call("automation_create", {"name": "tea", "schedule": {"type": "every", "mode": "interval",
                                                                     "interval": "2s"},
                                        "action": {"kind": "prompt", "prompt": "suggest a tea"}}),
        reply("Set up."),
    )
    out = await console.say("remind me every 2 seconds to drink tea")
    assert "Set up." in out, out
    model.script(reply("Try a green tea."))
    await console.wait_for("Try a green tea.")
    # the prompt ran in its own session, without the automation toolset
    prompt_request = model.requests[-1]
    assert "automation_create" not in prompt_request.tool_names
    assert prompt_request.said[-1]["content"] == "suggest a tea"
    assert now.tzinfo is not None


async def test_cancel_and_bad_input(console, model):
    reminder_id = re.search(r"Reminder (\S+) set", await console.say("/remind 10m stretch")).group(1)
    assert f"{reminder_id} · " in await console.say("/reminders")
    assert reminder_id in await console.say(f"/cancel {reminder_id}")
    assert await console.say("/reminders") == "No reminders. Set one with /remind 10m stretch.\n"
    assert "Usage: /remind <when> <text>" in await console.say("/remind")
    assert "there is no time 25:00" in await console.say("/remind 25:00 x")
    assert "Usage: /cancel <id>" in await console.say("/cancel")


async def test_cli_lists_and_deletes_automations(tmp_path, home, model):
    _, out, err = await anyy("chat", env=home, stdin="/remind 1h water the plants\n")
    assert "water the plants" in out, err
    code, out, _ = await anyy("automations", "list", env=home)
    assert code == 0 and "water the plants" in out
    automation_id = out.split()[0]
    code, out, _ = await anyy("automations", "delete", automation_id, env=home)
    assert code == 0 and "Deleted" in out
    code, _, err = await anyy("automations", "delete", automation_id, env=home)
    assert code == 1 and automation_id in err
    _, out, _ = await anyy("automations", "list", env=home)
    assert "No automations." in out
