"""Usage: the figures are the sums of what the model reported; costs follow the configured prices."""

import json

import pytest

from tests.fixtures.model import reply, tool_call
from tests.support.cli import anyy

pytestmark = pytest.mark.both_backends


async def test_usage_sums_the_models_reports_and_prices_them(start_console, make_config, model):
    h = await start_console(make_config(model={"price_in_per_mtok": 2.0, "price_out_per_mtok": 10.0,
                                               "price_cached_per_mtok": 0.5}))
    model.script(reply("one", usage=(1000, 100, 400)),
                 tool_call("task_create", {"title": "milk"}, usage=(2000, 50, 1500)),
                 reply("two", usage=(2100, 20, 2000)))
    await h.say("first")
    await h.say("add a task")
    out = await h.say("/usage")
    # 3 calls, 5100 in (3900 cached), 170 out; cost = (1200*2 + 3900*0.5 + 170*10) / 1e6 = 0.00605
    assert "Today: 3 calls, 5,100 in (3,900 cached), 170 out ≈ 0.0060" in out
    assert "This conversation: 3 calls" in out and "fake-1" in out


async def test_usage_without_prices_shows_tokens_and_how_to_price(console, model):
    model.script(reply("one", usage=(10, 5)))
    await console.say("hi")
    out = await console.say("/usage")
    assert "Today: 1 calls, 10 in, 5 out" in out and "≈" not in out and "price_in_per_mtok" in out


async def test_automation_turns_are_counted_and_labelled(start_console, make_config, model):
    h = await start_console(make_config(model={"price_in_per_mtok": 1.0, "price_out_per_mtok": 1.0}))
    model.script(reply("chat", usage=(100, 10)))
    await h.say("hello")
    session = await h.gw.runtime.sessions.get_or_create("automation:a1", h.console.origin, "console:owner",
                                                        kind="automation")
    model.script(reply("briefing", usage=(300, 30)))
    await h.gw.runtime.model_turn(session, "auto-a1-1", user_text="morning briefing")
    out = await h.say("/usage")
    assert "Today: 2 calls, 400 in, 40 out" in out and "automation turns: 1 calls, 300 in, 30 out" in out


async def test_anyy_usage_json(tmp_path, home, model):
    config = tmp_path / "config.toml"
    config.write_text(f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\nprice_in_per_mtok = 1.0\n'
                      'price_out_per_mtok = 4.0\n', encoding="utf-8")
    model.script(reply("hello", usage=(500, 50, 100)))
    code, _, err = await anyy("chat", "--config", str(config), env=home, stdin="hi\n")
    assert code == 0, err
    code, out, err = await anyy("usage", "--json", "--config", str(config), env=home)
    assert code == 0, err
    data = json.loads(out)
    assert data["total"] == {"calls": 1, "input_tokens": 500, "output_tokens": 50, "cached_tokens": 100,
                             "cost": round((500 * 1.0 + 50 * 4.0) / 1e6, 6)}
    assert data["by_model"]["fake-1"]["calls"] == 1 and data["by_kind"] == {"chat": data["total"]}
    code, out, err = await anyy("usage", "--since", "not-a-date", "--config", str(config), env=home)
    assert code == 2 and "invalid" in err


async def test_a_helpers_calls_are_counted_and_labelled(start_console, make_config, model):
    h = await start_console(make_config(model={"price_in_per_mtok": 1.0, "price_out_per_mtok": 1.0}))
    model.script(tool_call("delegate_task", {"task": "CHILD-TASK: look it up"}, usage=(100, 10)),
                 reply("CHILD-SUMMARY: found it", usage=(700, 70)), reply("Done.", usage=(200, 20)))
    await h.say("delegate this")
    out = await h.say("/usage")
    assert "Today: 3 calls, 1,000 in, 100 out" in out and "subagent turns: 1 calls, 700 in, 70 out" in out
