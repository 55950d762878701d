"""Bounded inputs: tool arguments, titles and names, inbound text (docs/limits.md)."""

from gateway.limits import ARGUMENTS_CHARS, INBOUND_CHARS, NESTING_DEPTH, STRING_CHARS
from store.audit import Audit
from store.messages import Messages
from store.tasks import Tasks
from tests.fixtures.model import reply, tool_call


def _tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def test_nested_huge_and_invalid_arguments_come_back_as_tool_errors(console, model):
    deep = '{"title": "x", "notes": ' + "[" * 5000 + "]" * 5000 + "}"  # past json's own recursion limit
    nested = '{"title": "x", "due": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}"
    model.script(
        tool_call("task_create", deep),
        tool_call("task_create", nested),
        tool_call("task_create", {"title": "x", "notes": "n" * (STRING_CHARS + 1)}),
        tool_call("task_create", '{"title": "bad \\ud800 text"}'),  # the escape is inside the arguments
        tool_call("task_create", '{"title": "raw \ud800 text"}'),  # the provider's JSON decodes to a surrogate
        tool_call("task_create", {"title": "fine"}),
        reply("Done."),
    )
    out = await console.say("add a task")
    assert out.strip() == "Done."  # the turn went on: no RecursionError, no UnicodeEncodeError
    results = _tool_results(model.requests[-1])
    assert f"nest deeper than {NESTING_DEPTH} levels" in results[0]
    assert "due.a.a" in results[1] and f"nested deeper than {NESTING_DEPTH}" in results[1]
    assert f"notes: a string of {STRING_CHARS + 1} characters" in results[2]
    assert "title: invalid Unicode (a lone surrogate U+D800" in results[3]
    assert "title: invalid Unicode (a lone surrogate U+D800" in results[4]
    assert all(r.startswith("Error: arguments for task_create were refused") for r in results[:5])
    assert [t.title for t in await Tasks(console.gw.store).list("console:owner")] == ["fine"]
    assert len(await Audit(console.gw.store).list()) == 1  # only the good call was audited
    stored = [m for m in await Messages(console.gw.store).recent("console:local", 0, 50) if m.role == "assistant"]
    assert "\\ud800" in stored[4].tool_calls[0].arguments  # kept, as an escape SQLite can store


async def test_a_lone_surrogate_in_the_model_text_is_replaced_not_fatal(console, model):
    model.script(tool_call("task_\udc00list", {}), reply("odd \ud800 reply"))
    out = await console.say("hello")
    assert out.strip() == "odd \ufffd reply"
    assert "unknown tool 'task_\ufffdlist'" in _tool_results(model.requests[-1])[0]


async def test_a_two_megabyte_task_title_is_refused_with_a_clear_error(console, model):
    model.script(tool_call("task_create", {"title": "t" * 2_000_000}), tool_call("task_create", {"title": "t" * 201}),
                 reply("Too long."))
    assert (await console.say("add a task")).strip() == "Too long."
    whole, title = _tool_results(model.requests[-1])
    assert f"the arguments are 2000013 characters; the limit is {ARGUMENTS_CHARS}" in whole
    assert "invalid arguments for task_create: title: String should have at most 200 characters" in title
    assert await Tasks(console.gw.store).list("console:owner") == []


async def test_a_long_automation_name_is_refused(console, model):
    model.script(tool_call("automation_create", {"name": "n" * 201, "schedule": {"kind": "interval", "every": "1h"},
                                                 "action": {"kind": "reminder", "text": "hi"}}),
                 reply("ok"))
    await console.say("remind me every 1h")
    [result] = _tool_results(model.requests[-1])
    assert "name: String should have at most 200 characters" in result


async def test_an_overlong_message_is_refused_before_the_model(console, model):
    requests = len(model.requests)
    out = await console.say("a" * (INBOUND_CHARS + 1))
    assert f"That message is {INBOUND_CHARS + 1} characters long; I take at most {INBOUND_CHARS}" in out
    assert len(model.requests) == requests
    assert (await console.say("a" * 100)).strip() == "echo: " + "a" * 100
