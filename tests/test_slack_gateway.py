"""Slack end to end: the real Gateway (runtime, approvals, outbox) with the Slack surface in Socket Mode,
against the fake Slack and the fake model; and `anyy run` as a subprocess configured for both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.app import Gateway
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.fixtures.slack import FakeSlack, is_post
from tests.support import side_effects
from tests.support.cli import SUBPROCESS_S
from tests.support.resident import resident, run_config
from tests.support.side_effects import EXECUTED
from tests.support.slack_events import APP_TOKEN, BOT_TOKEN, OWNER, STRANGER, dm, event_body, press_body


@pytest.fixture(autouse=True)
def _reset_side_effects() -> None:
    side_effects.reset()


@pytest_asyncio.fixture(loop_scope="function")
async def gateway(slack_gateway: Any) -> AsyncIterator[Gateway]:
    async with slack_gateway() as gw:
        yield gw


async def press(slack_fake: FakeSlack, user: str, action_id: str, prompt: dict[str, Any]) -> str:
    """Press a button of the posted `prompt` as `user`; returns what the presser was shown."""
    body = press_body(user, action_id, prompt["blocks"][1]["elements"][0]["value"], thread_ts=None)
    body["channel"]["id"] = body["container"]["channel_id"] = prompt["channel"]
    body["message"]["ts"] = body["container"]["message_ts"] = prompt["ts"]
    before = len(slack_fake.calls.items(lambda c: c.method == "chat.postEphemeral"))
    envelope = await slack_fake.send_envelope("interactive", body)
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    shown = await slack_fake.calls.wait(lambda c: c.method == "chat.postEphemeral", count=before + 1)
    assert shown[-1].args["user"] == user
    return str(shown[-1].args["text"])


async def test_dm_in_a_thread_is_answered_in_that_thread(gateway: Gateway, slack_fake: FakeSlack,
                                                         model: FakeModel) -> None:
    event = dm("hello there", ts="1710000000.000500", thread_ts="1710000000.000400")
    envelope = await slack_fake.send_envelope("events_api", event_body(event))
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    answer = (await slack_fake.calls.wait(is_post))[0].args
    assert (answer["channel"], answer["thread_ts"], answer["text"]) == ("D0001", "1710000000.000400",
                                                                       "echo: hello there")
    await gateway.idle()
    reactions = [(c.method, c.args["timestamp"])
                 for c in slack_fake.calls.items(lambda c: c.method.startswith("reactions."))]
    assert reactions == [("reactions.add", "1710000000.000500"), ("reactions.remove", "1710000000.000500")]


async def test_unknown_user_gets_a_pairing_code_not_a_turn(gateway: Gateway, slack_fake: FakeSlack,
                                                           model: FakeModel) -> None:
    await slack_fake.send_envelope("events_api", event_body(dm("hi", user=STRANGER)))
    answer = (await slack_fake.calls.wait(is_post))[0].args
    assert "pairing code" in answer["text"] and model.requests == []


async def test_approval_buttons_owner_executes_once_stranger_is_refused(gateway: Gateway, slack_fake: FakeSlack,
                                                                        model: FakeModel) -> None:
    model.script(tool_call("side_effect", {"note": "n1"}), reply("I asked for approval."))
    await slack_fake.send_envelope("events_api", event_body(dm("please do the side effect")))
    prompts = await slack_fake.calls.wait(lambda c: is_post(c) and "blocks" in c.args)
    await gateway.idle()
    posted = prompts[0].args
    prompt = {**posted, "ts": prompts[0].result["ts"]}
    elements = posted["blocks"][1]["elements"]
    assert [(e["action_id"], e.get("style")) for e in elements] == [("anyy_approve_0", "primary"),
                                                                     ("anyy_deny_1", "danger")]
    assert "not allowed" in await press(slack_fake, STRANGER, "anyy_approve_0", prompt)
    await gateway.idle()
    assert EXECUTED == []
    assert "Approved" in await press(slack_fake, OWNER, "anyy_approve_0", prompt)
    await gateway.idle()
    assert "Already" in await press(slack_fake, OWNER, "anyy_approve_0", prompt)
    await gateway.idle()
    assert EXECUTED == ["n1"]
    updates = slack_fake.posted("chat.update")
    assert updates and all((u["channel"], u["ts"]) == (prompt["channel"], prompt["ts"]) for u in updates)
    assert [b["type"] for b in updates[-1]["blocks"]] == ["section"]  # the outcome, buttons gone


async def test_anyy_run_answers_a_slack_dm(slack_fake: FakeSlack, model: FakeModel, tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[slack]
base_url = "{slack_fake.base_url}"
allowed_users = ["{OWNER}"]
socket_stale_s = 30""")
    async with resident(tmp_path, config, {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}) as anyy:
        await slack_fake.connections.wait(timeout=SUBPROCESS_S)
        envelope = await slack_fake.send_envelope("events_api", event_body(dm("hi from slack")))
        await slack_fake.acks.wait(lambda a: a.envelope_id == envelope, timeout=SUBPROCESS_S)
        answer = (await slack_fake.calls.wait(is_post, timeout=SUBPROCESS_S))[0].args
        assert (answer["channel"], answer["text"]) == ("D0001", "echo: hi from slack")
        assert await anyy.terminate(SUBPROCESS_S) == 0, anyy.output()
    output = anyy.output()
    assert "slack: up" in output and BOT_TOKEN not in output
