"""A client timeout after Slack accepted a post: the message is in the channel, our call gave up. The
outbox keeps the row's in-doubt mark across the retry, so the retry looks the message up and records it
instead of posting it a second time — for a one-part reply and for the second part of a long one."""

from __future__ import annotations

from pathlib import Path

from gateway.outbox import OutboxService
from gateway.surfaces.slack import SlackSurface
from store.db import Store
from store.records import Origin, Outbound
from tests.fixtures.slack import FakeSlack
from tests.support.slack_events import BOT_TOKEN
from tests.test_slack import RecordingPort, slack_config


async def deliver_through_a_timeout(slack_fake: FakeSlack, tmp_path: Path, text: str) -> tuple[str, str | None]:
    """Deliver one reply row through a real dispatcher and Slack surface whose calls give up after 1 s,
    while the fake answers chat.postMessage 2 s late (after the post is in the channel)."""
    async with Store(tmp_path / "anyy.db") as store:
        outbox = OutboxService(store)
        item_id = await outbox.repo.put(Outbound(origin=Origin(surface="slack", chat_id="D0001"), text=text), "reply")
        surface = SlackSurface(slack_config(slack_fake, mode="http", port=0, api_timeout_s=1), BOT_TOKEN, None,
                               "secret", tmp_path)
        await surface.start(RecordingPort())
        slack_fake.delay("chat.postMessage", 2)
        try:
            outbox.start({"slack": surface})
            await outbox.delivered(item_id, timeout_s=30)
            await outbox.stop()
        finally:
            await surface.stop()
        row = await store.run(lambda db: db.execute(
            "SELECT state, platform_message_id FROM outbox WHERE id = ?", [item_id]).fetchone())
    return row[0], row[1]


async def test_a_post_that_timed_out_is_found_not_posted_again(slack_fake: FakeSlack, tmp_path: Path) -> None:
    state, platform_id = await deliver_through_a_timeout(slack_fake, tmp_path, "The kettle is on.")
    [post] = slack_fake.calls.items(lambda c: c.method == "chat.postMessage")
    [message] = slack_fake.messages("D0001")
    assert (state, platform_id) == ("sent", f"D0001:{message['ts']}") and post.args["text"] == "The kettle is on."
    assert slack_fake.calls.items(lambda c: c.method == "conversations.history")  # looked up, once in doubt


async def test_a_long_reply_whose_second_part_timed_out_posts_each_part_once(slack_fake: FakeSlack,
                                                                            tmp_path: Path) -> None:
    long = ("word " * 900).strip() + "\n\n" + ("tail " * 200).strip()  # two parts
    state, _ = await deliver_through_a_timeout(slack_fake, tmp_path, long)
    messages = slack_fake.messages("D0001")
    assert state == "sent" and len(messages) == 2, [m["text"][:20] for m in messages]
    assert messages[1]["text"].endswith("tail")
