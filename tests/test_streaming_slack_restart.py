"""A streamed Slack reply survives a crash: `anyy run` on the fake Slack is killed with SIGKILL while the
reply is growing (posted, edited at least once, not finished), then restarted; the re-run turn edits that
same message to the complete text with chat.update, never posts the reply a second time, and takes the
dead process's hourglass off the owner's message."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.model import FakeModel, reply
from tests.fixtures.slack import ApiCall, FakeSlack
from tests.support.model_stream import Pace
from tests.support.resident import resident, run_config
from tests.support.slack_events import APP_TOKEN, BOT_TOKEN, OWNER, dm, event_body
from tests.test_streaming import LONG


def is_write(call: ApiCall) -> bool:
    """A successful post or edit of a message in the owner's DM (the reply; reactions are not writes)."""
    return call.ok and call.method in ("chat.postMessage", "chat.update") and call.args.get("channel") == "D0001"


async def test_kill_mid_stream_then_restart_updates_the_same_slack_message(slack_fake: FakeSlack, model: FakeModel,
                                                                          tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[slack]
base_url = "{slack_fake.base_url}"
allowed_users = ["{OWNER}"]
socket_stale_s = 30""")
    secrets = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "OPENAI_API_KEY": "test-key"}
    model.pace = Pace(tokens_per_s=10)  # 10 s of streaming: plenty of time to kill it midway
    model.script(reply(LONG))
    async with resident(tmp_path, config, secrets) as anyy:
        await slack_fake.connections.wait(timeout=60)
        envelope = await slack_fake.send_envelope("events_api", event_body(dm("explain streaming")))
        await slack_fake.acks.wait(lambda a: a.envelope_id == envelope, timeout=15)
        # An edit of the posted reply: the post is recorded as sent (the edit needed its ts), and the
        # reply is on the screen and growing.
        await slack_fake.calls.wait(lambda c: is_write(c) and c.method == "chat.update", timeout=30)
        anyy.process.kill()  # SIGKILL: no shutdown, the turn is left half done
        await anyy.process.wait()
    [post] = [c for c in slack_fake.calls.items(is_write) if c.method == "chat.postMessage"]
    ts = post.result["ts"]
    partial = slack_fake.calls.items(is_write)[-1].args["text"]
    assert LONG.startswith(partial) and partial != LONG, partial

    model.pace = Pace()
    model.script(reply(LONG))  # the re-run turn's model call
    async with resident(tmp_path, config, secrets) as anyy:
        await slack_fake.calls.wait(lambda c: is_write(c) and c.args.get("text") == LONG, timeout=60)
        await slack_fake.connections.wait(count=2, timeout=60)  # the restarted process is fully up
        assert await anyy.terminate() == 0, anyy.output()
    writes = slack_fake.calls.items(is_write)
    assert [c.method for c in writes].count("chat.postMessage") == 1, [c.method for c in writes]
    assert all(c.args["ts"] == ts for c in writes if c.method == "chat.update")
    assert writes[-1].method == "chat.update" and writes[-1].args["text"] == LONG
    assert len(model.requests) == 2  # the first, cut by the kill, and the re-run's
    # The hourglass the killed process put on the owner's message is gone once the re-run answered.
    reactions = [(c.method, c.args["timestamp"])
                 for c in slack_fake.calls.items(lambda c: c.method.startswith("reactions."))]
    assert reactions[0][0] == "reactions.add" and reactions[-1] == ("reactions.remove", reactions[0][1]), reactions
