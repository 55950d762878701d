"""Slash commands (no model needed) and access control for unknown users."""

import re

from store.access import AccessRepo
from store.outbox import Outbox
from store.records import Inbound


async def test_toolsets_pin_and_auto_change_what_the_model_sees(console, model):
    out = await console.say("/toolsets pin tasks")
    assert "Pinned: tasks" in out
    await console.say("what's the weather")
    assert model.requests[-1].tool_names == ["load_toolsets", "task_create", "task_list", "task_update",
                                             "task_complete"]
    assert "Toolsets of the last turn (pinned)" in await console.say("/toolsets")
    assert "Unknown toolsets: nope" in await console.say("/toolsets pin nope")
    await console.say("/toolsets auto")
    await console.say("hello")
    assert model.requests[-1].tool_names == ["load_toolsets"]  # chit-chat needs no toolset


async def test_tools_lists_visible_tools_without_the_model(console, model):
    await console.say("add a task to buy milk")
    requests = len(model.requests)
    tools = await console.say("/tools")
    assert "task_create" in tools and "load_toolsets" in tools
    assert len(model.requests) == requests


async def test_text_that_starts_with_a_slash_but_is_no_command_goes_to_the_model(console, model):
    out = await console.say("/etc/hosts is wrong")
    assert out.strip() == "echo: /etc/hosts is wrong"
    assert "Unknown command" not in out
    assert model.requests[-1].said[-1]["content"] == "/etc/hosts is wrong"


async def test_loader_makes_a_toolset_available_mid_turn(console, model):
    from tests.fixtures.model import reply, tool_call

    model.script(tool_call("load_toolsets", {"names": ["tasks"]}), tool_call("task_create", {"title": "x"}),
                 reply("done"))
    assert (await console.say("hmm")).strip() == "done"
    assert "task_create" not in model.requests[0].tool_names
    assert "task_create" in model.requests[1].tool_names


async def test_unknown_user_gets_a_pairing_code_and_no_model_turn(start_console, make_config, model):
    harness = await start_console(make_config(telegram={"allowed_users": [1]}))
    gw = harness.gw
    stranger = Inbound(surface="telegram", chat_id="99", user_id="99", user_name="eve", text="hi")
    for _ in range(4):
        await gw.receive(stranger)
    await gw.idle()
    rows = [r for r in await Outbox(gw.store).due("telegram") if r.outbound.origin.chat_id == "99"]
    assert len(rows) == 3  # told three times, then ignored until the code expires
    code = re.search(r"pairing code is ([A-Z0-9]{8})", rows[0].outbound.text).group(1)
    assert model.requests == []
    assert await AccessRepo(gw.store).redeem("telegram", "WRONG123") is None
    assert (await AccessRepo(gw.store).redeem("telegram", code)).user_id == "99"
    await gw.receive(stranger.model_copy(update={"text": "hello again"}))
    await gw.idle()
    assert (await Outbox(gw.store).due("telegram"))[-1].outbound.text == "echo: hello again"
    # the allowlisted user never needed pairing
    await gw.receive(Inbound(surface="telegram", chat_id="1", user_id="1", text="yo"))
    await gw.idle()
    assert (await Outbox(gw.store).due("telegram"))[-1].outbound.text == "echo: yo"


async def test_clarify_buttons_answer_once_even_when_double_tapped(console, model):
    from tests.fixtures.model import reply, tool_call

    model.script(tool_call("clarify", {"question": "Which one?", "options": ["Tea", "Coffee"]}))
    out = await console.say("help me choose a drink")
    assert "Which one?" in out and "1. Tea" in out
    answers = [await console.gw.press("console", "owner", "clarify", "Coffee", console.console.origin)
               for _ in range(2)]
    model.script(reply("Coffee it is."))
    await console.gw.idle()
    assert answers == ["You chose: Coffee"] * 2
    assert console.new_output() == "Coffee it is.\n"
    assert len(model.requests) == 2  # the question, then one answer
    assert model.requests[-1].said[-1]["content"] == "Coffee"


async def test_a_second_tap_after_the_answer_was_taken_is_still_the_one_answer(console, model):
    from tests.fixtures.model import reply, tool_call

    model.script(tool_call("clarify", {"question": "Which one?", "options": ["Tea", "Coffee"]}), reply("Coffee it is."))
    await console.say("help me choose a drink")
    first = await console.gw.press("console", "owner", "clarify", "Coffee", console.console.origin)
    await console.gw.idle()  # the answer's turn ran: the question is no longer open in the session
    second = await console.gw.press("console", "owner", "clarify", "Coffee", console.console.origin)
    await console.gw.idle()
    assert [first, second] == ["You chose: Coffee"] * 2
    assert len(model.requests) == 2


async def test_toolsets_used_in_the_last_turns_stay_selected(console, model):
    from tests.fixtures.model import reply, tool_call

    model.script(tool_call("task_create", {"title": "bread"}), reply("Added bread."))
    await console.say("add a task: bread")
    await console.say("and milk too")  # no keyword: still selected because tasks was just used
    assert "task_create" in model.requests[-1].tool_names
    await console.say("nice weather")
    assert "task_create" in model.requests[-1].tool_names  # used two turns back
    await console.say("how are you")
    assert model.requests[-1].tool_names == ["load_toolsets"]  # three turns back: no longer
