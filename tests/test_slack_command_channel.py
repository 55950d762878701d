"""`/anyy` typed in a Slack channel: the answer (the owner's own, or a stranger's pairing code) is never
posted to the channel. It goes to the person's direct messages, and the command's acknowledgement, which
Slack shows to that person alone, says so. A stranger who mentions Anyy in a channel gets no code there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gateway.app import Gateway
from tests.fixtures.slack import FakeSlack, is_post
from tests.support.slack_events import OWNER, STRANGER, event_body, mention

CHANNEL = "C0001"


@pytest_asyncio.fixture(loop_scope="function")
async def gateway(slack_gateway: Any) -> AsyncIterator[Gateway]:
    async with slack_gateway() as gw:
        yield gw


def command(text: str, user: str, trigger: str) -> dict[str, Any]:
    return {"token": "legacy", "team_id": "T0001", "channel_id": CHANNEL, "channel_name": "general",
            "user_id": user, "user_name": "someone", "command": "/anyy", "text": text, "api_app_id": "A0001",
            "response_url": "https://hooks.slack.invalid/commands/1", "trigger_id": trigger}


async def run(slack_fake: FakeSlack, gateway: Gateway, text: str, user: str, trigger: str) -> tuple[Any, Any]:
    """The command's ack and the one message posted for it."""
    envelope = await slack_fake.send_envelope("slash_commands", command(text, user, trigger))
    [ack] = await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    [posted] = await slack_fake.calls.wait(lambda c: is_post(c) and c.args.get("channel") == user)
    await gateway.idle()
    return ack, posted


async def test_an_owners_command_in_a_channel_is_answered_in_the_dm(gateway: Gateway, slack_fake: FakeSlack) -> None:
    ack, posted = await run(slack_fake, gateway, "remind 10m stretch", OWNER, "c1")
    assert "Reminder" in posted.args["text"]
    await run(slack_fake, gateway, "reminders", OWNER, "c2")
    assert slack_fake.messages(CHANNEL) == [] and not [c for c in slack_fake.calls.items()
                                                        if c.args.get("channel") == CHANNEL]
    assert ack.payload and "direct messages" in ack.payload["text"]


async def test_a_strangers_command_in_a_channel_gets_its_code_in_private(gateway: Gateway,
                                                                         slack_fake: FakeSlack) -> None:
    _, posted = await run(slack_fake, gateway, "hello", STRANGER, "c3")
    assert "pairing code" in posted.args["text"]
    assert slack_fake.messages(CHANNEL) == []


async def test_a_stranger_mentioning_anyy_in_a_channel_gets_no_code_there(gateway: Gateway,
                                                                         slack_fake: FakeSlack) -> None:
    envelope = await slack_fake.send_envelope("events_api", event_body(mention("hello", user=STRANGER,
                                                                              )))
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    [reply] = await slack_fake.calls.wait(is_post)
    await gateway.idle()
    assert "pairing code is" not in reply.args["text"] and "direct message" in reply.args["text"]
    assert await gateway.access.repo.pending() == []  # no code, and so no notice to the owner
