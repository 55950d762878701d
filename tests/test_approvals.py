"""Approvals end to end: held calls, one decision, one execution, restarts, tampering."""

import asyncio

import pytest

from store.approvals import Approvals
from store.audit import Audit
from store.records import iso, utcnow
from tests.fixtures.model import reply, tool_call
from tests.support import side_effects
from tests.support.side_effects import EXECUTED, TESTING
from toolsets.registry import TOOLSETS


@pytest.fixture(autouse=True)
def _reset_side_effects():
    side_effects.reset()
    yield
    side_effects.reset()


async def held(harness, model, note: str = "n1") -> str:
    """Have the model call the gated tool; return the approval id shown in the prompt."""
    model.script(tool_call("side_effect", {"note": note}), reply("I asked for approval."))
    out = await harness.say("please do the side effect")
    assert "Approval needed: side_effect" in out and f"Record the note: {note}" in out
    pending = await Approvals(harness.gw.store).list(("pending",))
    assert len(pending) == 1 and EXECUTED == []
    return pending[0].id


@pytest.fixture
async def gated(start_console):
    return await start_console(toolsets=[*TOOLSETS, TESTING])


async def test_approve_once_executes_once_and_the_conversation_continues(gated, model):
    approval_id = await held(gated, model)
    out = await gated.say(f"/approve {approval_id}")
    assert EXECUTED == ["n1"]
    assert "Approved; running it now." in out
    assert "(update to message" in out and "✅ Approved — done" in out  # the prompt message was edited
    rec = await Approvals(gated.gw.store).get(approval_id)
    assert rec.state == "succeeded" and rec.result == "recorded n1" and rec.decided_by == "console:owner"
    # the outcome entered the session and the model followed up once
    assert f"echo: [event] Approval {approval_id} for side_effect was approved" in out
    # the held call got an immediate result, so the transcript stayed valid for the provider
    first_followup = model.requests[1].messages
    assert any(m["role"] == "tool" and f"Awaiting approval {approval_id}" in m["content"] for m in first_followup)
    actions = [e.action for e in await Audit(gated.gw.store).list()]
    assert actions == ["approval.pending", "approval.approved", "approval.executing", "approval.succeeded"]


async def test_double_and_concurrent_approvals_execute_once(gated, model):
    approval_id = await held(gated, model)
    answers = await asyncio.gather(*[gated.gw.approvals.decide(approval_id, "console:owner", True) for _ in range(5)])
    await gated.gw.idle()
    assert EXECUTED == ["n1"]
    assert answers.count("Approved; running it now.") == 1
    assert "Already" in await gated.gw.approvals.decide(approval_id, "console:owner", True)
    await gated.gw.idle()
    assert EXECUTED == ["n1"]


async def test_deny_then_approve_runs_nothing(gated, model):
    approval_id = await held(gated, model)
    out = await gated.say(f"/deny {approval_id} not today")
    assert "Denied." in out and "🚫 Denied" in out and "Reason: not today" in out
    assert "Already denied" in await gated.say(f"/approve {approval_id}")
    assert EXECUTED == []


async def test_expired_approval_cannot_be_approved(gated, model):
    approval_id = await held(gated, model)
    await gated.gw.store.run(lambda db: db["approvals"].update(approval_id, {"expires_at": iso(utcnow())}))
    out = await gated.say(f"/approve {approval_id}")
    assert "expired" in out
    assert (await Approvals(gated.gw.store).get(approval_id)).state == "expired"
    assert EXECUTED == []


async def test_expiry_sweep_edits_the_prompt(gated, model):
    approval_id = await held(gated, model)
    await gated.gw.store.run(lambda db: db["approvals"].update(approval_id, {"expires_at": iso(utcnow())}))
    assert await gated.gw.approvals.sweep() == 1
    await gated.gw.idle()
    assert "⌛ Expired" in gated.new_output()


async def test_someone_not_allowed_cannot_decide(gated, model):
    approval_id = await held(gated, model)
    answer = await gated.gw.press("telegram", "666", "approve", approval_id, gated.console.origin)
    await gated.gw.idle()
    assert answer == "You are not allowed to use this assistant; nothing changed."
    assert (await Approvals(gated.gw.store).get(approval_id)).state == "pending"
    assert EXECUTED == []


async def test_configured_approver_may_decide(start_console, make_config, model):
    harness = await start_console(make_config(approvals={"approvers": ["telegram:42"]}), toolsets=[*TOOLSETS, TESTING])
    approval_id = await held(harness, model)
    assert await harness.gw.press("telegram", "42", "approve", approval_id, harness.console.origin) == \
        "Approved; running it now."
    await harness.gw.idle()
    assert EXECUTED == ["n1"]


async def test_pending_approval_survives_a_restart(start_console, make_config, model):
    cfg = make_config()
    first = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    approval_id = await held(first, model)
    await first.gw.stop()
    second = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    await second.say(f"/approve {approval_id}")
    assert EXECUTED == ["n1"]


async def test_crash_while_executing_becomes_unknown_and_is_never_retried(start_console, make_config, model):
    cfg = make_config()
    first = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    approval_id = await held(first, model)
    await first.gw.stop()
    # What a crash mid-execution leaves behind: the claim was taken, no outcome was written.
    async with __import__("store").Store(cfg.store_path) as store:
        repo = Approvals(store)
        await repo.transition(approval_id, ("pending",), "approved", "console:owner")
        await repo.transition(approval_id, ("approved",), "executing", "anyy")
    second = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    await second.gw.idle()
    out = second.new_output()
    assert "outcome is unknown" in out and "will not be retried" in out
    assert (await Approvals(second.gw.store).get(approval_id)).state == "unknown"
    assert "Already unknown" in await second.say(f"/approve {approval_id}")
    assert EXECUTED == []


async def test_decided_but_not_started_runs_after_restart(start_console, make_config, model):
    cfg = make_config()
    first = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    approval_id = await held(first, model)
    await first.gw.stop()
    async with __import__("store").Store(cfg.store_path) as store:  # approved, then the process died
        await Approvals(store).transition(approval_id, ("pending",), "approved", "console:owner")
    second = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    await second.gw.idle()
    assert EXECUTED == ["n1"]


async def test_tampered_arguments_are_refused_by_hash(gated, model):
    approval_id = await held(gated, model)
    await gated.gw.store.run(lambda db: db["approvals"].update(approval_id, {"args_json": '{"note":"evil"}'}))
    await gated.say(f"/approve {approval_id}")
    rec = await Approvals(gated.gw.store).get(approval_id)
    assert rec.state == "failed" and "hash mismatch" in rec.result
    assert EXECUTED == []


async def test_changed_binding_is_refused(gated, model):
    approval_id = await held(gated, model)
    side_effects.BINDING["version"] = "2"  # what the prompt showed is no longer what would run
    out = await gated.say(f"/approve {approval_id}")
    assert "has changed since" in out
    assert EXECUTED == []


async def test_governance_override_tightens_a_direct_tool(start_console, make_config, model):
    cfg = make_config(tool_governance={"overrides": {"harmless": {"execution": "confirm"}}})
    harness = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    model.script(tool_call("harmless", {"note": "x"}), reply("asked"))
    out = await harness.say("side effect please")
    assert "Approval needed: harmless" in out and EXECUTED == []


async def test_policy_hook_allows_denies_or_asks(start_console, make_config, model):
    cfg = make_config(approvals={"hook": "tests.support.hooks:by_note"})
    harness = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    for note in ("allow", "deny", "ask"):
        model.script(tool_call("hooked", {"note": note}), reply("ok"))
        await harness.say("side effect")
    assert EXECUTED == ["hooked:allow"]
    results = [m["content"] for r in model.requests for m in r.messages if m["role"] == "tool"]
    assert any("refused by the policy hook" in r for r in results)
    assert [a.tool for a in await Approvals(harness.gw.store).list(("pending",))] == ["hooked"]
    actions = [e.action for e in await Audit(harness.gw.store).list()]
    assert "tool.run" in actions and "tool.refused" in actions


async def test_an_override_cannot_loosen_a_policy(start_console, make_config, model):
    cfg = make_config(approvals={"hook": "tests.support.hooks:by_note"},
                      tool_governance={"overrides": {"side_effect": {"approval": "hook", "execution": "direct"}}})
    harness = await start_console(cfg, toolsets=[*TOOLSETS, TESTING])
    model.script(tool_call("side_effect", {"note": "allow"}), reply("done"))
    await harness.say("side effect")
    assert EXECUTED == [] and len(await Approvals(harness.gw.store).list(("pending",))) == 1


async def test_approvals_command_lists_pending(gated, model):
    approval_id = await held(gated, model)
    assert approval_id in await gated.say("/approvals")
    assert "No approval nope" in await gated.say("/approve nope")


def test_approval_ids_are_unguessable_and_shell_safe():
    from gateway.approvals.service import new_approval_id

    ids = {new_approval_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 16 and i.isalnum() for i in ids)
