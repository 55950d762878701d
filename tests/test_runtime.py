"""The turn loop end to end through the console surface, against the fake model server."""

from store.audit import Audit
from store.messages import Messages
from store.records import Inbound
from store.tasks import Tasks
from tests.fixtures.model import hang, last_user_text, malformed_args, reply, status, tool_call


async def test_plain_message_gets_the_model_reply(console, model):
    out = await console.say("hello there")
    assert out.strip() == "echo: hello there"
    system, said = model.requests[0].messages[0], model.requests[0].said[-1]
    assert system["role"] == "system" and "Current time:" not in system["content"]  # same every turn
    assert said == {"role": "user", "content": "hello there"}  # the time comes after what was said
    assert "Current time:" in model.requests[0].context and "Chat surface: console" in model.requests[0].context


async def test_tool_call_round_trip_is_stored_and_audited(console, model):
    model.script(tool_call("task_create", {"title": "buy milk"}), reply("Added it."))
    out = await console.say("add a task: buy milk")
    assert out.strip() == "Added it."
    tasks = await Tasks(console.gw.store).list("console:owner")
    assert [t.title for t in tasks] == ["buy milk"]
    roles = [m.role for m in await Messages(console.gw.store).recent("console:local", 0, 50)]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert [e.action for e in await Audit(console.gw.store).list()] == ["tool.run"]
    # the second request carried the tool result back, under the same call id
    second = model.requests[1].messages
    assert second[-1]["role"] == "tool" and "buy milk" in second[-1]["content"]


async def test_bad_arguments_become_results_the_model_can_recover_from(console, model):
    model.script(
        malformed_args("task_create", "{not json"),
        tool_call("task_create", {"titel": "typo"}),
        tool_call("no_such_tool", {}),
        reply("Sorry, fixed."),
    )
    out = await console.say("add a task")
    assert out.strip() == "Sorry, fixed."
    results = [m["content"] for m in model.requests[3].messages if m["role"] == "tool"]
    assert "not valid JSON" in results[0]
    assert "invalid arguments for task_create" in results[1] and "title" in results[1]
    assert "unknown tool 'no_such_tool'" in results[2]
    assert await Tasks(console.gw.store).list("console:owner") == []


async def test_unreachable_model_gives_a_clear_reply(start_console, make_config):
    cfg = make_config(model={"base_url": "http://127.0.0.1:9/v1", "max_retries": 0})
    harness = await start_console(cfg)
    out = await harness.say("hi")
    assert "the model at http://127.0.0.1:9/v1 is not answering" in out


async def test_model_errors_after_retries_reply_instead_of_crashing(console, model):
    model.script(status(500), status(500))
    out = await console.say("hi")
    assert "is not answering" in out and "500" in out
    assert (await console.say("again")).strip() == "echo: again"  # the lane still works


async def test_no_model_configured_names_the_setting_and_commands_still_work(start_console, make_config):
    cfg = make_config(model={"base_url": "", "model": ""})
    harness = await start_console(cfg, model=None)
    out = await harness.say("hello")
    assert "[model] base_url and model" in out and "test-config" in out
    assert "/remind" in await harness.say("/help")


async def test_a_message_arriving_mid_turn_waits_its_turn(console, model):
    model.responder = lambda body: reply(f"done {last_user_text(body)}")
    model.script(hang(0.5))  # the first request stalls; the client retries after the fake gives up
    await console.console.send_line("first")
    await model.wait_for_requests(1)  # the first turn is now in flight
    await console.console.send_line("second")
    await console.gw.idle()
    assert console.new_output().splitlines() == ["done first", "done second"]


async def test_sessions_run_concurrently(console, model):
    def responder(body):
        text = last_user_text(body)
        return hang(1.0) if text == "slow" and len(model.requests) == 1 else reply(f"ok {text}")

    model.responder = responder
    await console.gw.receive(Inbound(surface="console", chat_id="local", user_id="owner", text="slow"))
    await model.wait_for_requests(1)
    await console.gw.receive(Inbound(surface="console", chat_id="other", user_id="owner", text="fast"))
    await console.gw.idle()
    # the second session was answered while the first was still waiting on its model call
    assert console.new_output().splitlines() == ["ok fast", "ok slow"]
