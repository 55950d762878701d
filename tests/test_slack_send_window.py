"""The window between Slack accepting a post and the outbox recording it: `anyy run` is killed with
SIGKILL while the fake Slack holds back its answer to chat.postMessage (the message is in the channel, the
row does not know), then restarted. The restarted process finds the message by its metadata and records
it instead of posting it again. A lookup Slack refuses (no history scope) falls back to posting, once."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from gateway.outbox import OutboxService
from gateway.surfaces.slack import SlackSurface
from store.db import Store
from store.records import Origin, Outbound
from tests.fixtures.model import FakeModel, reply
from tests.fixtures.slack import ApiCall, FakeSlack
from tests.support.resident import resident, run_config
from tests.support.slack_events import APP_TOKEN, BOT_TOKEN, OWNER, dm, event_body
from tests.test_slack import RecordingPort, slack_config

ANSWER = "The kettle is on; tea in five minutes."


def is_post(call: ApiCall) -> bool:
    return call.method == "chat.postMessage" and call.args.get("channel") == "D0001"


def outbox_rows(db: Path) -> list[tuple[str, str | None, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT state, platform_message_id, sending_at FROM outbox ORDER BY id").fetchall()


async def test_kill_while_slack_answers_the_post_then_restart_posts_nothing_more(
        slack_fake: FakeSlack, model: FakeModel, tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[slack]
base_url = "{slack_fake.base_url}"
allowed_users = ["{OWNER}"]
socket_stale_s = 30""")
    secrets = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "OPENAI_API_KEY": "test-key"}
    model.script(reply(ANSWER))
    slack_fake.delay("chat.postMessage", 30)  # the post lands in the channel; its answer never arrives
    async with resident(tmp_path, config, secrets) as anyy:
        await slack_fake.connections.wait(timeout=60)
        await slack_fake.send_envelope("events_api", event_body(dm("is the tea ready?")))
        [post] = await slack_fake.calls.wait(is_post, timeout=60)
        anyy.process.kill()
        await anyy.process.wait()
    [(state, platform_id, sending_at)] = outbox_rows(tmp_path / "anyy.db")
    assert (state, platform_id) == ("pending", None) and sending_at is not None  # the row is in doubt
    assert post.args["metadata"]["event_type"] == "anyy_outbox"

    slack_fake.delay("chat.postMessage", 0)
    model.script(reply(ANSWER))  # should the re-run turn ask again
    restarted = time.monotonic()
    async with resident(tmp_path, config, secrets) as anyy:
        # The restarted process either looks the row up or (without the lookup) posts it again.
        await slack_fake.calls.wait(lambda c: c.at > restarted and (
            c.method == "conversations.history" or is_post(c)), timeout=60)
        await slack_fake.connections.wait(count=2, timeout=60)
        assert await anyy.terminate() == 0, anyy.output()  # a graceful stop lets the dispatcher finish
    posts = slack_fake.calls.items(is_post)
    assert len(posts) == 1, [c.args.get("text") for c in posts]
    assert outbox_rows(tmp_path / "anyy.db") == [("sent", f"D0001:{post.result['ts']}", None)]
    assert len(slack_fake.messages("D0001")) == 1


async def deliver_in_doubt(slack_fake: FakeSlack, tmp_path: Path, origin: Origin,
                           *texts: str) -> tuple[str, str | None]:
    """Write a reply row (rewritten once per text, as a stream does), leave it in doubt as a killed process
    would, let a real dispatcher deliver it through a started Slack surface; the row's state and id."""
    async with Store(tmp_path / "anyy.db") as store:
        outbox = OutboxService(store)
        for text in texts:
            item_id = await outbox.repo.put(Outbound(origin=origin, text=text), "reply")
        await outbox.repo.mark_sending(item_id)
        surface = SlackSurface(slack_config(slack_fake, mode="http", port=0), BOT_TOKEN, None, "secret", tmp_path)
        await surface.start(RecordingPort())
        try:
            outbox.start({"slack": surface})
            await outbox.delivered(item_id, timeout_s=30)
            await outbox.stop()
        finally:
            await surface.stop()
        row = await store.run(lambda db: db.execute(
            "SELECT state, platform_message_id, sending_at FROM outbox WHERE id = ?", [item_id]).fetchone())
    assert row[2] is None
    return row[0], row[1]


async def test_lookup_refused_for_a_missing_scope_still_delivers_once(slack_fake: FakeSlack, tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    slack_fake.fail("conversations.history", "missing_scope")
    caplog.set_level(logging.INFO, logger="gateway.surfaces.slack.sent")
    state, platform_id = await deliver_in_doubt(slack_fake, tmp_path, Origin(surface="slack", chat_id="D0001"), ANSWER)
    [post] = slack_fake.calls.items(lambda c: c.method == "chat.postMessage")
    assert (state, platform_id) == ("sent", f"D0001:{post.result['ts']}")
    assert [c.ok for c in slack_fake.calls.items(lambda c: c.method == "conversations.history")] == [False]
    assert "slack_lookup_failed" in caplog.text and "missing_scope" in caplog.text


async def test_thread_reply_found_in_part_posts_only_the_rest(slack_fake: FakeSlack, tmp_path: Path) -> None:
    """A two-part reply in a thread whose first part a killed process posted from an older text of the
    row: conversations.replies finds it, chat.update brings it up to date, only the second part is posted."""
    thread = "1710000000.000200"
    origin = Origin(surface="slack", chat_id="C0001", thread_id=thread)
    older, final = "word " * 10, ("word " * 900).strip() + "\n\n" + ("tail " * 200).strip()
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack_fake.base_url)
    # What the killed process posted: part 0 of row 1 (the first row of the empty store), revision 0.
    planted = await client.chat_postMessage(channel="C0001", thread_ts=thread, text=older, metadata={
        "event_type": "anyy_outbox", "event_payload": {"key": "1:0", "revision": 0}})
    state, platform_id = await deliver_in_doubt(slack_fake, tmp_path, origin, older, final)
    [lookup] = slack_fake.calls.items(lambda c: c.method == "conversations.replies")
    [update] = slack_fake.calls.items(lambda c: c.method == "chat.update")
    posts = slack_fake.calls.items(lambda c: c.method == "chat.postMessage")
    assert lookup.args["ts"] == thread and update.args["ts"] == planted["ts"]
    assert update.args["text"].startswith("word word") and "tail" not in update.args["text"]
    assert len(posts) == 2 and posts[1].args["metadata"]["event_payload"] == {"key": "1:1", "revision": 1}
    assert posts[1].args["text"].endswith("tail") and posts[1].args["thread_ts"] == thread
    assert (state, platform_id) == ("sent", f"C0001:{posts[1].result['ts']}")
