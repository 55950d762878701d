"""The Slack surface against the local fake Slack (tests/fixtures/slack.py): real slack-bolt and slack-sdk
code end to end, in HTTP mode (signed requests) and Socket Mode (a local websocket)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.config import SlackConfig
from gateway.surfaces.base import DeliveryError
from gateway.surfaces.slack import SlackSurface
from store.records import Button, Origin, Outbound, OutboxItem
from tests.fixtures.slack import BOT_USER_ID, FakeSlack
from tests.support.slack_events import (
    APP_TOKEN,
    BOT_TOKEN,
    OWNER,
    SECRET,
    STRANGER,
    dm,
    event_body,
    mention,
    post_event,
    post_press,
    post_signed,
    press_body,
)
from tests.support.slack_port import REFUSAL, RecordingPort


def slack_config(fake: FakeSlack, **overrides: Any) -> SlackConfig:
    return SlackConfig(base_url=fake.base_url, **overrides)


@pytest.fixture
def port() -> RecordingPort:
    return RecordingPort()


@pytest_asyncio.fixture(loop_scope="function")
async def http_surface(slack_fake: FakeSlack, port: RecordingPort, tmp_path: Path) -> AsyncIterator[SlackSurface]:
    surface = SlackSurface(slack_config(slack_fake, mode="http", port=0), BOT_TOKEN, None, SECRET, tmp_path)
    await surface.start(port)
    yield surface
    await surface.stop()


@pytest_asyncio.fixture(loop_scope="function")
async def socket_surface(slack_fake: FakeSlack, port: RecordingPort, tmp_path: Path) -> AsyncIterator[SlackSurface]:
    surface = SlackSurface(slack_config(slack_fake, socket_stale_s=30), BOT_TOKEN, APP_TOKEN, None, tmp_path)
    await surface.start(port)
    yield surface
    await surface.stop()


def item(text: str, origin: Origin | None = None, buttons: list[Button] | None = None, item_id: int = 1) -> OutboxItem:
    outbound = Outbound(origin=origin or Origin(surface="slack", chat_id="C0001", thread_id="1710000000.000200"),
                        text=text, buttons=buttons or [])
    return OutboxItem(id=item_id, outbound=outbound, created_at="2024-01-01T00:00:00+00:00")


# -- HTTP mode --------------------------------------------------------------------------------------------


async def test_http_dm_mention_and_thread_reply(http_surface: SlackSurface, port: RecordingPort) -> None:
    assert (await post_event(http_surface, dm("hello &amp; welcome"))).status == 200
    assert (await post_event(http_surface, mention("in channel"), event_id="Ev2")).status == 200
    reply = mention("in thread", ts="1710000000.000300", thread_ts="1710000000.000250")
    assert (await post_event(http_surface, reply, event_id="Ev3")).status == 200
    assert [(i.chat_id, i.user_id, i.text, i.thread_id, i.is_group) for i in port.accepted] == [
        ("D0001", OWNER, "hello & welcome", None, False),
        ("C0001", OWNER, "in channel", "1710000000.000200", True),
        ("C0001", OWNER, "in thread", "1710000000.000250", True),
    ]
    assert port.keys[0] == "slack:msg:D0001:1710000000.000100"


async def test_http_retry_and_double_event_are_one_turn(http_surface: SlackSurface, port: RecordingPort) -> None:
    first = await post_event(http_surface, dm("once"))
    retried = await post_event(http_surface, dm("once"), retry=1)
    # A DM that mentions the bot arrives twice more: as app_mention, with its own event id.
    as_mention = await post_event(http_surface, {**mention("once"), "channel": "D0001",
                                                 "ts": "1710000000.000100"}, event_id="Ev9")
    assert (first.status, retried.status, as_mention.status) == (200, 200, 200)
    assert len(port.keys) == 3 and len(set(port.keys)) == 1
    assert [i.text for i in port.accepted] == ["once"]


async def test_http_ack_waits_until_inbound_is_recorded(http_surface: SlackSurface, port: RecordingPort) -> None:
    gate = port.hold()
    entered = asyncio.Event()
    port.on_receive.append(lambda _inbound: entered.set())
    first = asyncio.create_task(post_event(http_surface, dm("first")))
    await asyncio.wait_for(entered.wait(), 5)
    port.on_receive.clear()
    # While the first message is being recorded a second one arrives and is handled (no drop), and the
    # first request is still unanswered: Slack only hears back once the inbound is durable.
    second = await post_event(http_surface, dm("second", ts="1710000000.000400"), event_id="Ev2")
    assert second.status == 200 and not first.done()
    gate.set()
    assert (await first).status == 200
    assert sorted(i.text for i in port.accepted) == ["first", "second"]


async def test_http_ignores_own_and_edited_messages(http_surface: SlackSurface, port: RecordingPort) -> None:
    for n, event in enumerate([dm("mine", user=BOT_USER_ID), dm("bot", bot_id="B9", ts="1.2"),
                               dm("edit", subtype="message_changed", ts="1.3")]):
        assert (await post_event(http_surface, event, event_id=f"Ev{n}")).status == 200
    await post_event(http_surface, dm("real", ts="1.4"), event_id="EvReal")
    assert [i.text for i in port.accepted] == ["real"]


async def test_http_shared_files_are_downloaded(http_surface: SlackSurface, port: RecordingPort,
                                                slack_fake: FakeSlack, tmp_path: Path) -> None:
    report = slack_fake.add_file("../q3 report.pdf", b"%PDF-1.7 numbers", "application/pdf")
    foreign = {**slack_fake.add_file("x.txt", b"x"), "url_private_download": "https://attacker.example/x.txt"}
    unscoped = slack_fake.add_file("y.png", b"y", "image/png", missing_scope=True)
    event = dm("summarize this", subtype="file_share", files=[report, foreign, unscoped])
    assert (await post_event(http_surface, event)).status == 200
    saved, skipped, refused = port.accepted[0].attachments
    assert (saved.name, saved.mime_type, saved.size) == ("q3_report.pdf", "application/pdf", 16)
    assert Path(saved.path).read_bytes() == b"%PDF-1.7 numbers"
    assert Path(saved.path).is_relative_to(tmp_path / "attachments" / "slack" / "D0001")
    assert (skipped.name, skipped.path, refused.name, refused.path) == ("x.txt", "", "y.png", "")
    downloads = slack_fake.calls.items(lambda c: c.method == "files.download")
    assert [(c.args["file_id"], c.token) for c in downloads] == [(report["id"], BOT_TOKEN),
                                                                  (unscoped["id"], BOT_TOKEN)]


async def test_http_rejects_bad_signature_and_stale_timestamp(http_surface: SlackSurface,
                                                              port: RecordingPort) -> None:
    body = json.dumps(event_body(dm("forged")))
    assert (await post_signed(http_surface, body, "application/json", secret="wrong")).status == 401
    old = int(time.time()) - 600
    assert (await post_signed(http_surface, body, "application/json", timestamp=old)).status == 401
    assert port.keys == []


async def test_http_url_verification(http_surface: SlackSurface) -> None:
    body = json.dumps({"token": "legacy", "challenge": "c-123", "type": "url_verification"})
    response = await post_signed(http_surface, body, "application/json")
    assert response.status == 200 and "c-123" in await response.text()


async def test_http_button_press_by_owner_and_by_stranger(http_surface: SlackSurface, port: RecordingPort,
                                                          slack_fake: FakeSlack) -> None:
    assert (await post_press(http_surface, press_body(OWNER))).status == 200
    assert (await post_press(http_surface, press_body(STRANGER, "anyy_deny_1"))).status == 200
    await port.wait("presses", 2)
    origin = Origin(surface="slack", chat_id="C0001", thread_id="1710000000.000200")
    assert port.presses == [("slack", OWNER, "approve", "ap-1", origin), ("slack", STRANGER, "deny", "ap-1", origin)]
    ephemeral = await slack_fake.calls.wait(lambda c: c.method == "chat.postEphemeral", count=2)
    shown = {c.args["user"]: c.args for c in ephemeral}
    assert shown[STRANGER]["text"] == REFUSAL and shown[STRANGER]["channel"] == "C0001"
    assert shown[STRANGER]["thread_ts"] == "1710000000.000200"
    assert shown[OWNER]["text"] == "Approved."


# -- Socket Mode ------------------------------------------------------------------------------------------


async def test_socket_event_and_press_are_acked(socket_surface: SlackSurface, port: RecordingPort,
                                                slack_fake: FakeSlack) -> None:
    envelope = await slack_fake.send_envelope("events_api", event_body(dm("over the socket")))
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    assert [i.text for i in port.accepted] == ["over the socket"]
    pressed = await slack_fake.send_envelope("interactive", press_body(STRANGER, value="ap-9"))
    await slack_fake.acks.wait(lambda a: a.envelope_id == pressed)
    await port.wait("presses")
    assert port.presses[0][1:4] == (STRANGER, "approve", "ap-9")
    refusal = await slack_fake.calls.wait(lambda c: c.method == "chat.postEphemeral")
    assert refusal[0].args["text"] == REFUSAL


async def test_socket_ack_follows_receive_and_redelivery_is_one_turn(socket_surface: SlackSurface,
                                                                     port: RecordingPort,
                                                                     slack_fake: FakeSlack) -> None:
    gate = port.hold()
    held = await slack_fake.send_envelope("events_api", event_body(dm("first")))
    other = await slack_fake.send_envelope("events_api", event_body(dm("second", ts="1.5"), "Ev2"))
    await slack_fake.acks.wait(lambda a: a.envelope_id == other)
    # Acks travel in order on one socket: had "first" been acked before its receive, it would be here.
    assert not slack_fake.acks.items(lambda a: a.envelope_id == held)
    gate.set()
    await slack_fake.acks.wait(lambda a: a.envelope_id == held)
    again = await slack_fake.send_envelope("events_api", event_body(dm("first"), "Ev1b"), retry_attempt=1)
    await slack_fake.acks.wait(lambda a: a.envelope_id == again)
    assert sorted(i.text for i in port.accepted) == ["first", "second"]


async def test_socket_silent_connection_is_replaced(slack_fake: FakeSlack, port: RecordingPort, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.surfaces.slack.health")
    stale_s = 1.5
    surface = SlackSurface(slack_config(slack_fake, socket_stale_s=stale_s), BOT_TOKEN, APP_TOKEN, None, tmp_path)
    await surface.start(port)
    try:
        first = await slack_fake.go_silent()
        started = time.monotonic()
        second = (await slack_fake.connections.wait(lambda n: n != first, timeout=3 * stale_s))[0]
        assert time.monotonic() - started < 2 * stale_s
        opened = slack_fake.calls.items(lambda c: c.method == "apps.connections.open" and c.ok)
        assert len(opened) == 2 and surface.socket_connections == 2
        assert any("slack_socket_reconnect" in r.getMessage() for r in caplog.records)
        envelope = await slack_fake.send_envelope("events_api", event_body(dm("heard again")), connection=second)
        acked = await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
        assert acked[0].connection == second and [i.text for i in port.accepted] == ["heard again"]
        assert surface.status() == "up"
    finally:
        await surface.stop()
    assert surface.status() == "down"


async def test_socket_refresh_request_reconnects(socket_surface: SlackSurface, port: RecordingPort,
                                                 slack_fake: FakeSlack) -> None:
    first = (await slack_fake.connections.wait())[0]
    await slack_fake.send_envelope("disconnect", {})
    second = (await slack_fake.connections.wait(lambda n: n != first))[0]
    envelope = await slack_fake.send_envelope("events_api", event_body(dm("after refresh")), connection=second)
    await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    assert [i.text for i in port.accepted] == ["after refresh"]


async def test_start_fails_clearly_on_refused_tokens(slack_fake: FakeSlack, port: RecordingPort,
                                                     tmp_path: Path) -> None:
    bad_app = SlackSurface(slack_config(slack_fake), BOT_TOKEN, "xoxb-not-an-app-token", None, tmp_path)
    with pytest.raises(RuntimeError, match="not_allowed_token_type"):
        await bad_app.start(port)
    await bad_app.stop()
    slack_fake.fail("auth.test", "invalid_auth")
    bad_bot = SlackSurface(slack_config(slack_fake, mode="http", port=0), BOT_TOKEN, None, SECRET, tmp_path)
    with pytest.raises(RuntimeError, match="invalid_auth"):
        await bad_bot.start(port)
    await bad_bot.stop()
    no_secret = SlackSurface(slack_config(slack_fake, mode="http"), BOT_TOKEN, None, None, tmp_path)
    with pytest.raises(RuntimeError, match="SLACK_SIGNING_SECRET"):
        await no_secret.start(port)


# -- delivery ---------------------------------------------------------------------------------------------


async def test_long_reply_is_split_in_thread(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(12))
    platform_id = await http_surface.deliver(item(text), None)
    posts = slack_fake.posted()
    assert len(posts) >= 3 and all(len(p["text"]) <= http_surface.max_text for p in posts)
    assert {p["thread_ts"] for p in posts} == {"1710000000.000200"} and {p["channel"] for p in posts} == {"C0001"}
    assert " ".join(" ".join(p["text"].split()) for p in posts) == " ".join(text.split())
    last = slack_fake.calls.items(lambda c: c.method == "chat.postMessage")[-1]
    assert platform_id and platform_id.startswith("C0001:") and "blocks" not in last.args


async def test_ratelimited_then_success_delivers_once(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    slack_fake.fail("chat.postMessage", "ratelimited", status=429, retry_after=7)
    with pytest.raises(DeliveryError) as failed:
        await http_surface.deliver(item("hello"), None)
    assert failed.value.transient and failed.value.retry_after == 7
    assert await http_surface.deliver(item("hello"), None)
    assert [p["text"] for p in slack_fake.posted()] == ["hello"]


async def test_retry_resumes_a_split_reply(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    text = "\n\n".join(letter * 3000 for letter in "abc")
    slack_fake.fail("chat.postMessage", "ratelimited", status=429, retry_after=1, after=1)
    with pytest.raises(DeliveryError) as failed:
        await http_surface.deliver(item(text), None)
    assert failed.value.transient
    await http_surface.deliver(item(text), None)
    assert [p["text"][0] for p in slack_fake.posted()] == ["a", "b", "c"]


async def test_delivery_works_after_stop(slack_fake: FakeSlack, port: RecordingPort, tmp_path: Path) -> None:
    # The gateway stops receiving first, then flushes its outbox through the stopped surfaces.
    surface = SlackSurface(slack_config(slack_fake, mode="http", port=0), BOT_TOKEN, None, SECRET, tmp_path)
    await surface.start(port)
    await surface.stop()
    assert (surface.status(), surface.http_port) == ("down", None)
    assert await surface.deliver(item("last words"), None)
    assert [p["text"] for p in slack_fake.posted()] == ["last words"]


async def test_delivery_error_kinds(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    slack_fake.fail("chat.postMessage", "channel_not_found")
    with pytest.raises(DeliveryError) as permanent:
        await http_surface.deliver(item("x"), None)
    slack_fake.fail("chat.postMessage", "internal_error", status=503)
    with pytest.raises(DeliveryError) as server:
        await http_surface.deliver(item("x"), None)
    assert (permanent.value.transient, server.value.transient) == (False, True)


async def test_buttons_and_edit_without_buttons(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    buttons = [Button(label="Approve", action="approve", value="ap-7"), Button(label="Deny", action="deny",
                                                                               value="ap-7")]
    platform_id = await http_surface.deliver(item("Send **mail** to bob?", buttons=buttons), None)
    blocks = slack_fake.posted()[0]["blocks"]
    assert blocks[0]["text"] == {"type": "mrkdwn", "text": "Send *mail* to bob?"}
    elements = blocks[1]["elements"]
    assert [(e["action_id"], e["value"], e.get("style")) for e in elements] == [
        ("anyy_approve_0", "ap-7", "primary"), ("anyy_deny_1", "ap-7", "danger")]
    outcome = Outbound(origin=Origin(surface="slack", chat_id="C0001"), text="Approved: mail sent", edit_of_outbox_id=1)
    edited = OutboxItem(id=2, outbound=outcome, created_at="2024-01-01T00:00:00+00:00")
    assert await http_surface.deliver(edited, platform_id) == platform_id
    update = slack_fake.posted("chat.update")[0]
    assert (f"{update['channel']}:{update['ts']}", update["text"]) == (platform_id, "Approved: mail sent")
    assert [b["type"] for b in update["blocks"]] == ["section"]


# -- progress ---------------------------------------------------------------------------------------------


async def test_progress_reaction_is_always_removed(http_surface: SlackSurface, slack_fake: FakeSlack) -> None:
    origin = Origin(surface="slack", chat_id="D0001")
    async with http_surface.progress(origin, "1710000000.000100"):
        added = await slack_fake.calls.wait(lambda c: c.method == "reactions.add")
        assert not slack_fake.calls.items(lambda c: c.method == "reactions.remove")
    assert added[0].args == {"channel": "D0001", "timestamp": "1710000000.000100", "name": "hourglass_flowing_sand"}
    with pytest.raises(RuntimeError):
        async with http_surface.progress(origin, "1710000000.000200"):
            raise RuntimeError("turn failed")
    inside = asyncio.Event()

    async def turn() -> None:
        async with http_surface.progress(origin, "1710000000.000300"):
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(turn())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    removed = await slack_fake.calls.wait(lambda c: c.method == "reactions.remove", count=3)
    assert [c.args["timestamp"] for c in removed] == ["1710000000.000100", "1710000000.000200", "1710000000.000300"]


async def test_socket_wedged_receiver_is_replaced(slack_fake: FakeSlack, port: RecordingPort, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.surfaces.slack.health")
    surface = SlackSurface(slack_config(slack_fake, socket_stale_s=1.5), BOT_TOKEN, APP_TOKEN, None, tmp_path)
    await surface.start(port)
    try:
        first = (await slack_fake.connections.wait())[0]
        # The shape of slack-sdk issue 1446: the SDK's receive loop is gone while the socket stays open
        # (the server still answers pings), so nothing is read any more and the SDK cannot notice.
        assert surface._socket is not None and surface._socket._handler is not None
        surface._socket._handler.client.message_receiver.cancel()
        second = (await slack_fake.connections.wait(lambda n: n != first, timeout=5))[0]
        assert any("reason=stale" in r.getMessage() for r in caplog.records)
        envelope = await slack_fake.send_envelope("events_api", event_body(dm("heard again")), connection=second)
        await slack_fake.acks.wait(lambda a: a.envelope_id == envelope)
    finally:
        await surface.stop()
