"""Admin commands on the same store as a chat: approvals, audit, pairing."""

from __future__ import annotations

import re

from tests.fixtures.model import reply, tool_call
from tests.support.cli import anyy, write_config


def gated_config(tmp_path, model) -> str:  # type: ignore[no-untyped-def]
    return write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\nmax_retries = 0\n'
                                  '[tool_governance]\noverrides = { task_create = { execution = "confirm" } }\n')


async def test_approve_from_the_shell_runs_the_held_call_once(tmp_path, home, model):
    cfg = gated_config(tmp_path, model)
    model.script(tool_call("task_create", {"title": "file taxes"}), reply("Waiting for your approval."))
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="add task file taxes\n")
    assert code == 0, err
    approval_id = re.search(r"/approve (\S+)", out).group(1)
    code, out, _ = await anyy("approvals", "list", "--config", cfg, env=home)
    assert approval_id in out and "task_create" in out
    code, out, err = await anyy("approvals", "approve", approval_id, "--config", cfg, env=home)
    assert code == 0, err
    assert "Now: succeeded" in out
    code, out, _ = await anyy("approvals", "approve", approval_id, "--config", cfg, env=home)
    assert "Already succeeded; nothing changed." in out
    # the next chat delivers what the shell decision queued: the edited prompt and the follow-up
    code, out, _ = await anyy("chat", "--config", cfg, env=home, stdin="/tasks\n")
    assert "✅ Approved — done" in out and "file taxes" in out
    assert out.count("#1 file taxes") == 1
    code, out, _ = await anyy("audit", "--config", cfg, env=home)
    for action in ("approval.pending", "approval.approved", "approval.executing", "approval.succeeded"):
        assert action in out


async def test_deny_from_the_shell_and_unknown_pairing_codes(tmp_path, home, model):
    cfg = gated_config(tmp_path, model)
    model.script(tool_call("task_create", {"title": "x"}), reply("asked"))
    _, out, _ = await anyy("chat", "--config", cfg, env=home, stdin="add a task: x\n")
    approval_id = re.search(r"/approve (\S+)", out).group(1)
    _, out, _ = await anyy("approvals", "deny", approval_id, "--reason", "no", "--config", cfg, env=home)
    assert "Denied." in out
    _, out, _ = await anyy("approvals", "list", "--all", "--config", cfg, env=home)
    assert "denied" in out
    code, _, err = await anyy("pairing", "approve", "telegram", "NOPE2345", "--config", cfg, env=home)
    assert code == 1 and "no pending telegram pairing code" in err
    code, out, _ = await anyy("pairing", "list", "--config", cfg, env=home)
    assert code == 0 and "No pending pairing codes." in out
