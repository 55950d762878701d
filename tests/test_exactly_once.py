"""Issue 13, in process: the history keeps an interrupted call paired, leases decide who may take work
over, and a prompt automation's re-run continues its own turn. (Kill -9 tests: test_crash_recovery.py.)"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

import pytest

from gateway import checkpoints
from gateway.turns.history import UNKNOWN_OUTCOME, fit_history
from store import leases
from store.approvals import Approvals
from store.records import AutomationRecord, MessageRecord, ToolCallRecord, iso, utcnow
from tests.fixtures.model import reply, tool_call
from tests.support import side_effects
from tests.support.model_wire_rules import wire_problem
from tests.support.side_effects import TESTING
from toolsets.registry import TOOLSETS

pytestmark = pytest.mark.both_backends


def test_a_call_without_a_result_stays_in_view_paired_with_an_unknown_outcome():
    calls = [ToolCallRecord(id="c1", name="task_create", arguments='{"title":"milk"}'),
             ToolCallRecord(id="c2", name="task_list", arguments="{}")]
    rows = [MessageRecord(session_id="s", turn_id="t1", role="user", content="add milk"),
            MessageRecord(session_id="s", turn_id="t1", role="assistant", content="", tool_calls=calls),
            MessageRecord(session_id="s", turn_id="t1", role="tool", content="[]", tool_call_id="c2",
                          tool_name="task_list"),
            MessageRecord(session_id="s", turn_id="t2", role="user", content="did you add it?")]
    view = fit_history(rows, 10_000)
    assert [(m.role, m.tool_call_id) for m in view] == [
        ("user", None), ("assistant", None), ("tool", "c2"), ("tool", "c1"), ("user", None)]
    assert [c.id for c in view[1].tool_calls] == ["c1", "c2"] and view[3].content == UNKNOWN_OUTCOME
    wire = [{"role": m.role, "content": m.content, **({"tool_call_id": m.tool_call_id} if m.tool_call_id else {}),
             **({"tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                for c in m.tool_calls]} if m.tool_calls else {})} for m in view]
    assert wire_problem("openai", {"model": "m", "messages": wire}, {}) is None


async def test_leases_let_only_stopped_owners_work_be_taken_over():
    # Taken when the test runs, not at import: a long run under load once outlived a 5-minute horizon set at import.
    soon, past = iso(utcnow() + timedelta(hours=1)), iso(utcnow() - timedelta(seconds=1))
    assert leases.takeable(None, None) and not leases.takeable(leases.OWNER, past)  # never our own work
    assert not leases.takeable("elsewhere/123/456", soon)  # another host: trusted until its lease lapses
    assert leases.takeable("elsewhere/123/456", past)
    live = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    try:
        started = leases._start_time(live.pid)  # what the child itself would record as its owner id
        assert not leases.takeable(f"{leases.HOST}/{live.pid}/{started}", soon)
        assert leases.takeable(f"{leases.HOST}/{live.pid}/{started}1", soon)  # the pid was reused
    finally:
        live.kill()
        await live.wait()
    assert leases.takeable(f"{leases.HOST}/{live.pid}/{started}", soon)  # gone: no need to wait out the lease
    assert leases.OWNER.startswith(f"{leases.HOST}/{os.getpid()}/")


async def test_a_prompt_automation_rerun_for_the_same_slot_continues_its_turn(start_console, model):
    harness = await start_console()
    gw = harness.gw
    rec = AutomationRecord(id="a1", user_key="console:owner", origin=harness.console.origin, name="chores",
                           schedule={}, action={"kind": "prompt", "prompt": "add milk to my tasks"},
                           created_at=iso(utcnow()), updated_at=iso(utcnow()))
    slot = iso(utcnow().replace(microsecond=0))

    async def stop() -> None:
        raise RuntimeError("the process stopped here")

    model.script(tool_call("task_create", {"title": "milk"}), reply("Added milk."))
    with checkpoints.intercept("tool.ran", stop), pytest.raises(RuntimeError):
        await gw.run_prompt(rec, slot)
    assert await gw.run_prompt(rec, slot) == "Added milk."  # the same turn, continued: not asked again
    tasks = await gw.store.run(lambda db: [r["title"] for r in db["tasks"].rows])
    assert tasks == ["milk"]
    last = model.requests[-1].said
    assert [m["content"] for m in last if m["role"] == "tool"] == [UNKNOWN_OUTCOME]
    assert last[-1]["role"] == "tool"  # the continuation of the turn, not the prompt asked a second time
    assert [m["content"] for m in last if m["role"] == "user"] == ["add milk to my tasks"]


async def test_periodic_recovery_leaves_this_process_s_running_work_alone(start_console, model):
    harness = await start_console(toolsets=[*TOOLSETS, TESTING])
    side_effects.reset()
    model.script(tool_call("side_effect", {"note": "n1"}), reply("Asked."))
    await harness.say("please do the side effect")
    (pending,) = await Approvals(harness.gw.store).list(("pending",))

    async def recover_meanwhile() -> None:  # the resident's 30 s recovery tick, mid-execution
        await harness.gw.approvals.recover()
        await harness.gw.runtime.recover()

    with checkpoints.intercept("approval.claimed", recover_meanwhile):
        await harness.say(f"/approve {pending.id}")
    assert (await Approvals(harness.gw.store).get(pending.id)).state == "succeeded"  # type: ignore[union-attr]
    assert side_effects.EXECUTED == ["n1"]
    side_effects.reset()
