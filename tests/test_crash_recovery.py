"""Issue 13: exactly once across crashes. A real `anyy chat` (or `anyy run`) child is killed with
`kill -9` at each step of a turn (`ANYY_PAUSE_AT`, see gateway/checkpoints.py); after every restart
each effect happened at most once — tasks in the store, messages at the SMTP server — and the owner was
told of every unknown outcome."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config
from tests.fixtures.mail import PASSWORD, SmtpRecorder
from tests.fixtures.model import reply, tool_call
from tests.support.cli import SUBPROCESS_S, model_config
from tests.support.crash import chat_once, start
from tests.support.postgres import Backend

pytestmark = pytest.mark.both_backends


@pytest.fixture
def cfg(tmp_path: Path, model: Any, email_section: dict[str, Any], backend: Backend) -> str:
    email = "\n".join(f"{key} = {json.dumps(value)}" for key, value in email_section.items())  # TOML scalars
    return model_config(tmp_path, model, f"""
[store]
path = "{tmp_path / 'store' / 'anyy.db'}"
{f'url = "{backend.url}"' if backend.url else ''}

[email]
{email}
""")


@pytest.fixture
def env(home: dict[str, str]) -> dict[str, str]:
    return {**home, "ANYY_TEST_MAIL_PASSWORD": PASSWORD}


async def rows(cfg_path: str, sql: str) -> list[tuple[Any, ...]]:
    async with load_config(cfg_path).new_store() as store:
        return await store.run(lambda db: [tuple(r) for r in db.execute(sql).fetchall()])


INLINE = {"to": ["anna@example.net"], "subject": "Lunch", "body": "See you at 12"}


async def test_killed_before_the_model_call_the_turn_runs_once(cfg, env, model):
    model.script(tool_call("task_create", {"title": "milk"}), reply("Added milk."))
    child = await start("chat", cfg, env, lines=["add milk to my tasks"], pause_at="model.before_call")
    await child.wait_paused("model.before_call")
    await child.kill()
    assert model.requests == []
    out = await chat_once(cfg, env)
    assert out.splitlines() == ["Added milk."]
    assert await rows(cfg, "SELECT title FROM tasks") == [("milk",)]


async def test_killed_after_the_turn_opened_its_message_stays_once_and_the_rerun_records_the_selection(
        cfg, env, model):
    model.script(tool_call("task_create", {"title": "milk"}), reply("Added milk."))
    child = await start("chat", cfg, env, lines=["add milk to my tasks"], pause_at="model.before_call")
    await child.wait_paused("model.before_call")
    await child.kill()
    # The turn's opening trip is whole (session and message); the selection waits for the turn's next write.
    assert await rows(cfg, "SELECT role, content FROM messages") == [("user", "add milk to my tasks")]
    assert await rows(cfg, "SELECT last_selection FROM sessions") == [(None,)]
    out = await chat_once(cfg, env)
    assert out.splitlines() == ["Added milk."]
    assert await rows(cfg, "SELECT role FROM messages ORDER BY id") == [
        ("user",), ("assistant",), ("tool",), ("assistant",)]  # the message not written again
    ((selection,),) = await rows(cfg, "SELECT last_selection FROM sessions")
    assert "tasks" in json.loads(selection)["names"]


async def test_killed_after_a_direct_tool_ran_it_is_not_run_again_and_the_owner_is_told(cfg, env, model):
    model.script(tool_call("task_create", {"title": "milk"}), reply("Noted: I could not confirm the task."))
    child = await start("chat", cfg, env, lines=["add milk to my tasks"], pause_at="tool.ran")
    await child.wait_paused("tool.ran")
    await child.kill()
    out = await chat_once(cfg, env)
    assert await rows(cfg, "SELECT title FROM tasks") == [("milk",)]  # once, not twice
    assert "⚠️ task_create was running when Anyy stopped. Its outcome is unknown and it was not run again" in out
    assert "Noted: I could not confirm the task." in out
    # The model saw the call paired with the unknown outcome, so it can check instead of calling again.
    (result,) = [m for m in model.requests[-1].messages if m["role"] == "tool"]
    assert result["content"].startswith("Outcome unknown: the process stopped while this ran.")
    assert await rows(cfg, "SELECT tool, state FROM tool_journal") == [("task_create", "unknown")]
    assert await chat_once(cfg, env) == ""  # nothing left to recover


async def test_killed_after_a_call_was_held_the_rerun_finds_the_same_approval(cfg, env, model,
                                                                            smtp_recorder: SmtpRecorder):
    model.script(tool_call("email_send", INLINE), reply("Asked for approval."))
    child = await start("chat", cfg, env, lines=["email anna about lunch"], pause_at="approval.held")
    await child.wait_paused("approval.held")
    await child.kill()
    out = await chat_once(cfg, env)
    assert "Asked for approval." in out
    ((approval_id, state),) = await rows(cfg, "SELECT id, state FROM approvals")
    assert state == "pending"
    assert await rows(cfg, "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'approval:%:prompt'") == [(1,)]
    assert out.count(f"/approve {approval_id}") <= 1  # one prompt (the killed child may have shown it)
    held = [m for m in model.requests[-1].messages if m["role"] == "tool"]
    assert [m["content"].split(":")[0] for m in held] == [f"Awaiting approval {approval_id}"]
    out = await chat_once(cfg, env, f"/approve {approval_id}", f"/approve {approval_id}")
    assert "Already" in out
    (got,) = smtp_recorder.received
    assert got.rcpt_tos == ["anna@example.net"]


async def held_email(cfg: str, env: dict[str, str], model: Any) -> str:
    model.script(tool_call("email_send", INLINE), reply("Asked for approval."))
    out = await chat_once(cfg, env, "email anna about lunch")
    found = re.search(r"/approve (\w+)", out)
    assert found, out
    return found.group(1)


async def test_killed_after_approve_before_the_send_nothing_is_sent_and_the_owner_is_told(
        cfg, env, model, smtp_recorder: SmtpRecorder):
    approval_id = await held_email(cfg, env, model)
    child = await start("chat", cfg, env, lines=[f"/approve {approval_id}"], pause_at="approval.claimed")
    await child.wait_paused("approval.claimed")
    await child.kill()
    out = await chat_once(cfg, env)
    assert f"⚠️ email_send (approval {approval_id}) was running when Anyy stopped. Its outcome is unknown" in out
    assert await rows(cfg, "SELECT state FROM approvals") == [("unknown",)]
    assert smtp_recorder.received == []
    assert "Already unknown" in await chat_once(cfg, env, f"/approve {approval_id}")
    assert smtp_recorder.received == []


async def test_killed_during_the_send_the_message_goes_out_at_most_once(cfg, env, model,
                                                                         smtp_recorder: SmtpRecorder):
    approval_id = await held_email(cfg, env, model)
    smtp_recorder.stall = True  # the server has the message; the sender waits for its "250"
    child = await start("chat", cfg, env, lines=[f"/approve {approval_id}"])
    assert await asyncio.to_thread(smtp_recorder.data_arrived.wait, SUBPROCESS_S)
    await child.kill()
    smtp_recorder.stall = False
    out = await chat_once(cfg, env)
    assert "Its outcome is unknown and it will not be retried automatically" in out
    assert await rows(cfg, "SELECT state FROM approvals") == [("unknown",)]
    assert "Already unknown" in await chat_once(cfg, env, f"/approve {approval_id}")
    assert len(smtp_recorder.received) == 1


@pytest.mark.sqlite_only  # residents share a PostgreSQL store on purpose (docs/scale.md)
async def test_two_residents_on_one_store_the_second_refuses(tmp_path, cfg, env):
    first = await start("run", cfg, env, close_stdin=False)
    try:
        await first.wait_for_stderr("No chat surface is configured")
        other_home = {**env, "ANYY_HOME": str(tmp_path / "other-home")}  # another data dir, the same store
        second = await start("run", cfg, other_home)
        _, err = await asyncio.wait_for(second.process.communicate(), SUBPROCESS_S)
        assert second.process.returncode == 1
        assert f"another Anyy process (pid {first.process.pid}) is already running on the store" in err.decode()
    finally:
        assert await first.terminate() == 0


async def test_a_resident_start_leaves_a_live_chat_turn_alone(tmp_path, cfg, env, model):
    resident = await start("run", cfg, env, close_stdin=False)
    await resident.wait_for_stderr("No chat surface is configured")
    model.script(tool_call("task_create", {"title": "milk"}), reply("Added."))
    chat = await start("chat", cfg, env, lines=["add milk to my tasks"], pause_at="tool.ran")  # run holds the lock
    try:
        await chat.wait_paused("tool.ran")
        assert await resident.terminate() == 0
        resident = await start("run", cfg, env, close_stdin=False)  # recovery runs before this line
        await resident.wait_for_stderr("No chat surface is configured")
        assert not any("turn_recovered" in line for line in resident.stderr_lines)
        assert await rows(cfg, "SELECT title FROM tasks") == [("milk",)]
        ((owner,),) = await rows(cfg, "SELECT owner FROM inbound_queue WHERE state = 'pending'")
        assert f"/{chat.process.pid}/" in owner  # still the chat's, under its lease
    finally:
        await chat.kill()
        await resident.terminate()


async def test_a_resident_start_leaves_a_live_chat_execution_alone(cfg, env, model, smtp_recorder: SmtpRecorder):
    approval_id = await held_email(cfg, env, model)
    resident = await start("run", cfg, env, close_stdin=False)
    await resident.wait_for_stderr("No chat surface is configured")
    chat = await start("chat", cfg, env, lines=[f"/approve {approval_id}"], pause_at="approval.claimed")
    try:
        await chat.wait_paused("approval.claimed")
        assert await resident.terminate() == 0
        resident = await start("run", cfg, env, close_stdin=False)
        await resident.wait_for_stderr("No chat surface is configured")
        assert await rows(cfg, "SELECT state FROM approvals") == [("executing",)]  # not marked unknown
    finally:
        await chat.kill()
        await resident.terminate()
    assert smtp_recorder.received == []
