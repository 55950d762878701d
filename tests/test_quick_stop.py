"""A quick stop of a real `anyy run` on Telegram with a backlog: SIGTERM takes no new turn, gives the turns in
flight `[runtime] stop_grace_s`, and exits within 10 s however many messages wait; a second signal exits at
once; the next start answers the rest, each message once and in order."""

from __future__ import annotations

import asyncio
import collections
import re
import signal
import time
from pathlib import Path

from tests.fixtures.model import FakeModel
from tests.support.cli import SUBPROCESS_S
from tests.support.model_stream import Pace
from tests.support.model_wire import hang
from tests.support.resident import resident, run_config
from tests.support.telegram_api import FakeBot

FIRST_USER = 4001
CHATS, PER_CHAT = 10, 20
_ECHO = re.compile(r"echo: chat (\d+) message (\d+)")


def config(tmp_path: Path, tg: FakeBot, model: FakeModel, runtime: str = "", per_bot_per_s: float = 10000) -> Path:
    users = ", ".join(str(FIRST_USER + c) for c in range(CHATS))
    return run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{users}]
poll_timeout_s = 10

[telegram.limits]
per_bot_per_s = {per_bot_per_s}
per_chat_per_s = 10000
per_group_per_min = 10000

[runtime]
{runtime}""")


def backlog(tg: FakeBot) -> None:
    for m in range(PER_CHAT):
        for c in range(CHATS):
            tg.message(f"chat {c} message {m}", user_id=FIRST_USER + c, user_name=f"user{c}")


def answered(tg: FakeBot) -> dict[int, list[int]]:
    """Per chat, the message numbers the bot's replies answer, in the order the chat shows them."""
    per_chat: dict[int, list[int]] = collections.defaultdict(list)
    with tg.lock:
        shown = sorted((mid, m) for (_, mid), m in tg.messages.items() if m["from"]["id"] == tg.id)
    for _, message in shown:
        found = _ECHO.search(message.get("text", ""))  # the fake keeps what the chat shows
        assert found, message
        assert message["chat"]["id"] == FIRST_USER + int(found[1])
        per_chat[int(found[1])].append(int(found[2]))
    return per_chat


def secrets(tg: FakeBot) -> dict[str, str]:
    return {"TELEGRAM_BOT_TOKEN": tg.token, "OPENAI_API_KEY": "test-key"}


async def test_sigterm_with_a_backlog_exits_within_10_s_and_the_restart_answers_the_rest_once(
        tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    model.pace = Pace(first_token_s=1.0)  # every turn is in the model's hands for a second
    backlog(tg)
    path = config(tmp_path, tg, model)
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await tg.wait_calls("sendMessage", CHATS, timeout=SUBPROCESS_S)  # under way: a turn per chat done
        model.pace = Pace(first_token_s=3.0)  # the turns now in flight finish within the grace
        await model.wait_for_requests(len(model.requests) + 1, timeout=SUBPROCESS_S)
        started = time.monotonic()
        assert await anyy.terminate(timeout=15) == 0, anyy.output()[-3000:]
        took = time.monotonic() - started
    assert took < 10, f"stopped in {took:.1f} s"
    first_run = sum(len(v) for v in answered(tg).values())
    assert first_run < CHATS * PER_CHAT, "nothing was left for the restart: the backlog was too small to show"
    assert "shutdown_with_turns_running" not in anyy.output()  # the turns in flight finished in the grace
    model.pace = Pace()
    async with resident(tmp_path, path, secrets(tg)) as again:
        await tg.wait_calls("sendMessage", CHATS * PER_CHAT, timeout=60)
        await asyncio.sleep(0.5)  # a duplicate would show now
        assert await again.terminate() == 0
    assert answered(tg) == {c: list(range(PER_CHAT)) for c in range(CHATS)}
    assert len(tg.sent("sendMessage")) == CHATS * PER_CHAT


async def test_the_outbox_flush_is_bounded_by_the_grace_and_the_rest_is_sent_after_restart(
        tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    backlog(tg)
    slow = config(tmp_path, tg, model, "stop_grace_s = 1", per_bot_per_s=2)  # replies queue up behind the limit
    async with resident(tmp_path, slow, secrets(tg)) as anyy:
        await tg.wait_calls("sendMessage", 2, timeout=SUBPROCESS_S)
        started = time.monotonic()
        assert await anyy.terminate(timeout=15) == 0, anyy.output()[-3000:]
        took = time.monotonic() - started
    assert took < 1 + 1 + 2, f"stopped in {took:.1f} s with a 1 s grace"  # the turns', the flush's, the rest
    assert "outbox_stop_with_pending" in anyy.output()  # replies were left for the next start
    first_run = len(tg.sent("sendMessage"))
    async with resident(tmp_path, config(tmp_path, tg, model), secrets(tg)) as again:
        await tg.wait_calls("sendMessage", CHATS * PER_CHAT, timeout=60)
        await asyncio.sleep(0.5)
        assert await again.terminate() == 0
    assert first_run < CHATS * PER_CHAT
    assert answered(tg) == {c: list(range(PER_CHAT)) for c in range(CHATS)}
    assert len(tg.sent("sendMessage")) == CHATS * PER_CHAT


async def test_a_turn_longer_than_the_grace_is_stopped_and_answered_once_after_restart(
        tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    model.script(hang(30))  # the model hangs past the grace (well within the client's timeout and retry)
    tg.message("chat 0 message 0", user_id=FIRST_USER, user_name="user0")
    path = config(tmp_path, tg, model, "stop_grace_s = 1")
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await model.wait_for_requests(1, timeout=SUBPROCESS_S)
        started = time.monotonic()
        assert await anyy.terminate(timeout=15) == 0, anyy.output()[-3000:]
        took = time.monotonic() - started
    assert took < 1 + 2 * 2, f"stopped in {took:.1f} s with a 1 s grace"  # the grace, the flush's, the rest
    assert "shutdown_with_turns_running" in anyy.output()
    assert not tg.sent("sendMessage")
    model.reset()
    async with resident(tmp_path, path, secrets(tg)) as again:
        await tg.wait_calls("sendMessage", timeout=SUBPROCESS_S)
        await asyncio.sleep(0.5)
        assert await again.terminate() == 0
    assert answered(tg) == {0: [0]}


async def test_a_second_signal_exits_at_once(tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    model.script(hang(30))
    tg.message("chat 0 message 0", user_id=FIRST_USER, user_name="user0")
    path = config(tmp_path, tg, model, "stop_grace_s = 30")
    async with resident(tmp_path, path, secrets(tg)) as anyy:
        await model.wait_for_requests(1, timeout=SUBPROCESS_S)
        anyy.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)  # the graceful stop is waiting on the turn (30 s of grace)
        assert anyy.process.returncode is None
        started = time.monotonic()
        anyy.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(anyy.process.wait(), 5)
        took = time.monotonic() - started
    assert code == 128 + signal.SIGINT and took < 2, (code, took)
    assert "shutdown_forced signal=SIGINT" in anyy.output()
    model.reset()
    async with resident(tmp_path, path, secrets(tg)) as again:
        await tg.wait_calls("sendMessage", timeout=SUBPROCESS_S)
        await asyncio.sleep(0.5)
        assert await again.terminate() == 0
    assert answered(tg) == {0: [0]}
