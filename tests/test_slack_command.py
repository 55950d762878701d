"""The one Slack slash command, `/anyy …`, over Socket Mode on the fake Slack: `/anyy approve ID` and
`/anyy remind …` work as the chat commands do, and a stranger's `/anyy` gets a pairing code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gateway.app import Gateway
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.fixtures.slack import FakeSlack, is_post
from tests.support.slack_events import OWNER, STRANGER


@pytest_asyncio.fixture(loop_scope="function")
async def gateway(slack_gateway: Any) -> AsyncIterator[Gateway]:
    async with slack_gateway(tool_governance={"overrides": {"task_create": {"execution": "confirm"}}}) as gw:
        yield gw


def command(text: str, user: str = OWNER, trigger: str = "13345224609.738474920.8088930838d88f008e0") -> dict[str, Any]:
    """A slash_commands payload as Slack sends it (form fields, decoded)."""
    return {"token": "legacy", "team_id": "T0001", "channel_id": "D0001", "channel_name": "directmessage",
            "user_id": user, "user_name": "owner", "command": "/anyy", "text": text, "api_app_id": "A0001",
            "response_url": "https://hooks.slack.invalid/commands/1", "trigger_id": trigger}


async def say(slack_fake: FakeSlack, text: str, **kwargs: Any) -> str:
    before = len(slack_fake.calls.items(is_post))
    envelope = await slack_fake.send_envelope("slash_commands", command(text, **kwargs))
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    return str((await slack_fake.calls.wait(is_post, count=before + 1))[-1].args["text"])


async def test_anyy_remind_and_approve(gateway: Gateway, slack_fake: FakeSlack, model: FakeModel) -> None:
    assert "Reminder" in await say(slack_fake, "remind 10m stretch", trigger="t1")
    assert "/remind" in await say(slack_fake, "", trigger="t2")  # `/anyy` alone is /help
    model.script(tool_call("task_create", {"title": "file taxes"}), reply("Waiting for you."))
    envelope = await slack_fake.send_envelope("events_api", {
        "type": "event_callback", "event_id": "Ev9", "event": {
            "type": "message", "channel": "D0001", "channel_type": "im", "user": OWNER, "text": "add task file taxes",
            "ts": "1710000000.000900"}})
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    await gateway.idle()
    [pending] = await gateway.approvals.repo.list(("pending",))
    answer = await say(slack_fake, f"approve {pending.id}", trigger="t3")
    await gateway.idle()
    assert (await gateway.approvals.repo.get(pending.id)).state == "succeeded", answer
    sent = [m.get("content") for r in model.requests for m in r.messages]
    assert f"/approve {pending.id}" not in sent and "/remind 10m stretch" not in sent  # commands skip the model


async def test_a_strangers_command_gets_a_pairing_code(gateway: Gateway, slack_fake: FakeSlack,
                                                        model: FakeModel) -> None:
    assert "pairing code" in await say(slack_fake, "tasks", user=STRANGER, trigger="t4")
    assert model.requests == []
