"""Slack text and payload translation: Markdown to mrkdwn and back, which events are turns, Inbound fields."""

from gateway.surfaces.slack.events import is_turn, to_inbound
from gateway.surfaces.slack.format import from_mrkdwn, mrkdwn_chunks, to_mrkdwn
from tests.fixtures.slack import BOT_USER_ID
from tests.support.slack_events import dm, mention

# -- rendering and translation ---------------------------------------------------------------------------


def test_markdown_renders_as_mrkdwn() -> None:
    assert to_mrkdwn("**bold** and *it* and ~~gone~~") == "*bold* and _it_ and ~gone~"
    assert to_mrkdwn("see [the docs](https://x.org/a?b=1&c=2)") == "see <https://x.org/a?b=1&amp;c=2|the docs>"
    assert to_mrkdwn("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d"
    assert to_mrkdwn("# Title\n- one\n- two") == "*Title*\n• one\n• two"
    assert to_mrkdwn("`**x** <y>`") == "`**x** &lt;y&gt;`"
    assert to_mrkdwn("```python\nif a < b: **c**\n```") == "```if a &lt; b: **c**```"
    assert to_mrkdwn("<https://example.com>") == "<https://example.com>"
    assert to_mrkdwn("> quoted\n\nnot > quoted") == "> quoted\n\nnot &gt; quoted"
    # CommonMark's lazy continuation: a line right under a quote belongs to it.
    assert to_mrkdwn("> quoted\nstill quoted") == "> quoted\n> still quoted"
    assert to_mrkdwn("ping <!channel> <@U1>") == "ping &lt;!channel&gt; &lt;@U1&gt;"  # the model cannot ping


def test_long_markdown_splits_within_limit_after_escaping() -> None:
    text = "\n\n".join(f"para {i} " + "&" * 300 for i in range(30))
    chunks = mrkdwn_chunks(text, 3000)
    assert len(chunks) > 3 and all(len(c) <= 3000 for c in chunks)
    assert "".join(chunks).count("&amp;") == 30 * 300


def test_incoming_slack_markup_becomes_plain_text() -> None:
    assert from_mrkdwn("a &lt;b&gt; &amp; <https://x.org|site> <https://y.org> <mailto:a@b.c|a@b.c>") == \
        "a <b> & site (https://x.org) https://y.org a@b.c"


def test_which_events_are_turns() -> None:
    assert is_turn(dm("hi"), BOT_USER_ID)
    assert is_turn(mention("hi"), BOT_USER_ID)
    assert not is_turn(dm("mine", user=BOT_USER_ID), BOT_USER_ID)
    assert not is_turn(dm("other bot", bot_id="B9"), BOT_USER_ID)
    assert not is_turn(dm("edited", subtype="message_changed"), BOT_USER_ID)
    assert not is_turn(dm("gone", subtype="message_deleted"), BOT_USER_ID)
    assert not is_turn({**dm("chatter"), "channel": "C0001", "channel_type": "channel"}, BOT_USER_ID)
    assert is_turn(dm("a file", subtype="file_share"), BOT_USER_ID)


def test_inbound_translation() -> None:
    inbound = to_inbound(mention("what's   up?"), BOT_USER_ID, [])
    assert (inbound.text, inbound.thread_id, inbound.is_group) == ("what's up?", "1710000000.000200", True)
    threaded = to_inbound(mention("more", ts="1710000000.000300", thread_ts="1710000000.000200"), BOT_USER_ID, [])
    assert threaded.thread_id == "1710000000.000200"
    direct = to_inbound(dm("hello"), BOT_USER_ID, [])
    assert (direct.chat_id, direct.thread_id, direct.is_group, direct.platform_message_id) == \
        ("D0001", None, False, "1710000000.000100")
