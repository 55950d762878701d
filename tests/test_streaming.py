"""Streamed replies end to end: the real Gateway with the Telegram surface on the fake Bot API, the Slack
surface on the fake Slack, and the console, against the fake model streaming at a set pace; and `anyy run`
killed with SIGKILL mid-stream, then restarted."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.config import Config
from gateway.surfaces.telegram import TelegramSurface
from gateway.surfaces.telegram.format import to_html
from gateway.surfaces.text import split_text
from store.records import Origin
from tests.fixtures.model import FakeModel, cut_off, reply, tool_call
from tests.fixtures.slack import FakeSlack
from tests.support.model_stream import Pace
from tests.support.resident import resident, run_config
from tests.support.slack_events import dm, event_body
from tests.support.telegram_api import OWNER_ID, Call, FakeBot

WORDS = ("Streaming shows the answer while the model is still writing it, so a long reply on a phone "
         "is readable after half a second instead of after fifteen. ")
LONG = (WORDS * 4).strip()  # 100 words
INTERVAL = 0.4  # the throttle the tests give the surfaces (1 s in production), so they run quickly


def throttled(gw: Gateway) -> Gateway:
    """Give the gateway's surface the test throttle (read at every turn, so setting it after start works)."""
    for surface in gw.surfaces:
        surface.live_interval_s = INTERVAL  # type: ignore[attr-defined]
    return gw


def writes(tg: FakeBot) -> list[Call]:
    return [c for c in tg.sent() if c.method in ("sendMessage", "editMessageText")]


def shown(tg: FakeBot) -> list[str]:
    """What the owner's chat shows from the bot, oldest first."""
    with tg.lock:
        return [m["text"] for (c, _), m in sorted(tg.messages.items()) if c == OWNER_ID and m["from"]["id"] == tg.id]


def words(text: str) -> list[str]:
    """Text without its layout (rendering drops the spaces at the end of a paragraph)."""
    return text.split()


def assert_throttled(times: list[float], interval: float) -> None:
    """Writes arrive about once per interval. The throttle spaces the writes it issues; the dispatcher's
    delivery adds jitter on a loaded machine (one late delivery shortens the next gap), so single gaps get
    a wide margin and the mean gap a narrow one. Unthrottled, the gaps would be one token apart (25 ms)."""
    gaps = [b - a for a, b in pairwise(times)]
    assert gaps and min(gaps) >= interval * 0.5, gaps
    assert sum(gaps) / len(gaps) >= interval * 0.9, gaps


async def test_telegram_reply_streams_into_one_message_edited_to_the_final_text(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.pace = Pace(first_token_s=0.2, tokens_per_s=40)  # 100 words: 2.5 s of streaming
    model.script(reply(LONG))
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("explain streaming")
        [first] = await tg.wait_calls("sendMessage")
        assert len(first.params["text"]) < len(LONG)  # sent while the model was still writing
        await tg.wait(lambda: shown(tg) == [LONG], timeout=10, what="the final text")
        await gw.idle()
    calls = writes(tg)
    assert [c.method for c in calls].count("sendMessage") == 1 and len(calls) >= 4
    assert calls[-1].params["text"] == to_html(LONG) and calls[-1].params["parse_mode"] == "HTML"
    assert_throttled([c.at for c in calls], INTERVAL)
    assert model.requests[0].body["stream"] is True


async def test_short_reply_is_one_send_and_no_edit(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("hi")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    assert [c.method for c in writes(tg)] == ["sendMessage"] and shown(tg) == ["echo: hi"]


async def test_streamed_tool_call_runs_once(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.pace = Pace(tokens_per_s=200)
    model.script(tool_call("task_create", {"title": "buy milk"}, text="Let me add that to your tasks right away."),
                 reply("Added **buy milk** to your tasks. " + WORDS))
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("add a task: buy milk")
        final = "Added buy milk to your tasks. " + WORDS.strip()
        await tg.wait(lambda: shown(tg) == [final], timeout=10, what="the final text")
        await gw.idle()
        count = await gw.store.run(lambda db: db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])
    assert count == 1 and len(model.requests) == 2
    assert "Error" not in model.requests[1].messages[-1]["content"]
    assert [c.method for c in writes(tg)].count("sendMessage") == 1  # the first call's text was replaced


async def test_model_error_mid_stream_is_marked_in_the_message(tg: FakeBot, model: FakeModel,
                                                               telegram_gateway: Any) -> None:
    model.pace = Pace(tokens_per_s=100)
    model.script(cut_off(LONG, after=40), reply("a silent restart would show this"))
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("explain streaming")
        await tg.wait(lambda: shown(tg) and "⚠️" in shown(tg)[0], timeout=10, what="the cut-off note")
        await gw.idle()
    [text] = shown(tg)
    before, note = text.split("\n\n⚠️ ")
    assert LONG.startswith(before) and len(before.split()) == 40
    assert note.startswith("the reply was cut off: ") and len(model.requests) == 1


async def test_reasoning_with_only_its_closing_tag_is_edited_away(tg: FakeBot, model: FakeModel,
                                                                   telegram_gateway: Any) -> None:
    # A Qwen3-style content: the template opened <think> in the prompt, so the content only closes it.
    model.pace = Pace(first_token_s=0.2, tokens_per_s=40)
    model.script(reply("SECRET the owner asks about streaming, so explain it briefly. " * 2 + "</think>\n\n" + LONG))
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("explain streaming")
        await tg.wait(lambda: shown(tg) == [LONG], timeout=15, what="the final text")
        await gw.idle()
    texts = [c.params["text"] for c in writes(tg)]
    assert "SECRET" in texts[0]  # nothing told it apart from an answer before the tag
    after = texts[next(i for i, t in enumerate(texts) if "SECRET" not in t):]
    assert len(after) >= 2 and all("SECRET" not in t for t in after)  # edited away while the answer streamed
    assert [c.method for c in writes(tg)].count("sendMessage") == 1


async def test_long_reply_continues_in_a_new_message(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    text = "\n\n".join(f"Paragraph {i}. " + WORDS * 3 for i in range(12))  # about 5,600 characters
    model.pace = Pace(tokens_per_s=1000)
    model.script(reply(text))
    async with telegram_gateway() as gw:
        throttled(gw)
        tg.message("write a lot")
        expected = [words(p) for p in split_text(text, TelegramSurface.max_text - 8)]
        await tg.wait(lambda: [words(s) for s in shown(tg)] == expected, timeout=15, what="two final messages")
        await gw.idle()
    assert len(expected) == 2 and [c.method for c in writes(tg)].count("sendMessage") == 2


def test_groups_are_edited_less_often(tg: FakeBot, tmp_path: Path) -> None:
    surface = TelegramSurface(tg.config(), tg.token, tmp_path)
    private, group = Origin(surface="telegram", chat_id="1001"), Origin(surface="telegram", chat_id="-100777")
    assert (surface.live(private).interval_s, surface.live(group).interval_s) == (1.0, 3.0)
    assert surface.live(private).max_chars < TelegramSurface.max_text


async def test_stream_false_sends_whole_replies(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.script(reply(LONG))
    async with telegram_gateway(runtime={"stream": False}) as gw:
        tg.message("explain streaming")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    assert [c.method for c in writes(tg)] == ["sendMessage"] and shown(tg) == [LONG]
    assert model.requests[0].body["stream"] is False


async def test_slack_reply_streams_with_chat_update(slack_fake: FakeSlack, model: FakeModel,
                                                    slack_gateway: Any) -> None:
    model.pace = Pace(first_token_s=0.2, tokens_per_s=40)
    model.script(reply(LONG))
    async with slack_gateway() as gw:
        throttled(gw)
        await slack_fake.send_envelope("events_api", event_body(dm("explain streaming")))
        await slack_fake.calls.wait(lambda c: c.method == "chat.update" and c.args.get("text") == LONG, timeout=10)
        await gw.idle()
    calls = slack_fake.calls.items(lambda c: c.method in ("chat.postMessage", "chat.update") and c.ok)
    [post] = [c for c in calls if c.method == "chat.postMessage"]
    assert len(post.args["text"]) < len(LONG) and len(calls) >= 4
    assert all(c.args["ts"] == post.result["ts"] for c in calls[1:])
    assert_throttled([c.at for c in calls], INTERVAL)


async def test_console_prints_as_the_text_arrives(start_console: Callable[..., Any], model: FakeModel) -> None:
    model.pace = Pace(tokens_per_s=50)
    model.script(reply(LONG))
    console = await start_console()
    await console.console.send_line("explain streaming")
    seen = await console.wait_for("Streaming shows the answer")
    assert LONG not in seen  # printed before the model finished
    await console.gw.idle()
    assert seen + console.new_output() == LONG + "\n"


async def test_anthropic_stream_end_to_end(start_console: Callable[..., Any], make_config: Callable[..., Config],
                                           model: FakeModel) -> None:
    model.pace = Pace(tokens_per_s=200)
    model.script(tool_call("task_create", {"title": "call mum"}, text="Adding it."), reply(WORDS))
    console = await start_console(make_config(model={"provider": "anthropic", "base_url": model.url_anthropic}))
    assert await console.say("add a task: call mum") == WORDS + "\n"
    assert [r.body.get("stream") for r in model.requests] == [True, True]
    assert len([m for m in model.requests[1].messages if m["role"] == "assistant"]) == 1


async def test_kill_mid_stream_then_restart_edits_the_same_message(tg: FakeBot, model: FakeModel,
                                                                   tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10""")
    secrets = {"TELEGRAM_BOT_TOKEN": tg.token, "OPENAI_API_KEY": "test-key"}
    model.pace = Pace(tokens_per_s=10)  # 10 s of streaming: plenty of time to kill it midway
    model.script(reply(LONG))
    async with resident(tmp_path, config, secrets) as anyy:
        await tg.wait_calls("getUpdates", timeout=60)
        tg.message("explain streaming")
        await tg.wait_calls("editMessageText", timeout=30)  # the reply is on the screen and growing
        anyy.process.kill()  # SIGKILL: no shutdown, the turn is left half done
        await anyy.process.wait()
    [partial] = shown(tg)
    assert LONG.startswith(partial) and partial != LONG
    model.pace = Pace()
    model.script(reply(LONG))  # the re-run turn's model call
    async with resident(tmp_path, config, secrets) as anyy:
        await tg.wait(lambda: shown(tg) == [LONG], timeout=60, what="the same message edited to the final text")
        assert await anyy.terminate() == 0
    assert [c.method for c in writes(tg)].count("sendMessage") == 1 and len(model.requests) == 2
