"""The file and terminal toolsets through the real gateway, fake model server and console surface:
every change to the machine is held for the owner, shown as a diff or a command, and applied once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from store.approvals import Approvals
from store.audit import Audit
from tests.fixtures.model import reply, tool_call
from tests.support.context import RecordingContext
from toolsets.base import ToolError
from toolsets.terminal import process


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every command these tests hold would run for real if the policy were broken: `~` must never be
    the real home directory (`rm -rf ~` is one of them)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep").write_text("precious")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def host_config(make_config, ws: Path, tmp_path: Path):
    def make(**sections):
        return make_config(workspace={"root": str(ws), "write_roots": [str(tmp_path / "extra")]}, **sections)
    return make


@pytest.fixture
async def host(start_console, host_config):
    return await start_console(host_config())


def tool_result(model) -> str:
    """The newest tool result the model was sent."""
    for req in reversed(model.requests):
        for m in reversed(req.messages):
            if m["role"] == "tool":
                return m["content"]
    raise AssertionError("no tool result was sent to the model")


async def call(harness, model, name: str, args: dict, text: str = "please use the file or run the command") -> str:
    model.script(tool_call(name, args), reply("ok"))
    await harness.say(text)
    return tool_result(model)


async def pending(harness) -> list:
    return await Approvals(harness.gw.store).list(("pending",))


async def held(harness, model, name: str, args: dict) -> str:
    result = await call(harness, model, name, args)
    assert "Awaiting approval" in result, result
    recs = await pending(harness)
    assert len(recs) == 1, recs
    return recs[0].id


# -- files ------------------------------------------------------------------------------------------


async def test_read_is_anchored_to_the_workspace_and_bounded(host, model, ws):
    ws.mkdir()
    (ws / "notes.md").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    result = await call(host, model, "read_file", {"path": "notes.md", "offset": 10, "limit": 5})
    assert "lines 10-14 of 50" in result and "offset=15" in result
    assert "line 10\n" in result and "line 14\n" in result and "line 15" not in result
    assert "<untrusted" in result  # file content is data, not instructions
    result = await call(host, model, "read_file", {"path": "missing.md"})
    assert "does not exist" in result


async def test_write_new_file_is_held_then_written_once(host, model, ws):
    approval_id = await held(host, model, "write_file", {"path": "todo.md", "content": "buy milk\n"})
    assert not (ws / "todo.md").exists()
    rec = (await pending(host))[0]
    assert rec.execution == "change_plan" and "New file" in rec.preview and "buy milk" in rec.preview
    answers = await asyncio.gather(*[host.gw.approvals.decide(approval_id, "console:owner", True) for _ in range(3)])
    await host.gw.idle()
    assert answers.count("Approved; running it now.") == 1
    assert (ws / "todo.md").read_bytes() == b"buy milk\n"
    assert (await Approvals(host.gw.store).get(approval_id)).state == "succeeded"
    assert "Already" in await host.gw.approvals.decide(approval_id, "console:owner", True)
    leftovers = [p.name for p in ws.iterdir()]
    assert leftovers == ["todo.md"]  # no temporary file left behind


async def test_overwrite_needs_a_read_and_shows_a_diff(host, model, ws):
    ws.mkdir()
    (ws / "todo.md").write_text("buy milk\nbuy egs\n")
    result = await call(host, model, "write_file", {"path": "todo.md", "content": "x\n"})
    assert "has not been read" in result and await pending(host) == []
    await call(host, model, "read_file", {"path": "todo.md"})
    approval_id = await held(host, model, "patch", {"path": "todo.md", "old_text": "egs", "new_text": "eggs"})
    preview = (await pending(host))[0].preview
    assert "-buy egs" in preview and "+buy eggs" in preview
    await host.say(f"/approve {approval_id}")
    assert (ws / "todo.md").read_text() == "buy milk\nbuy eggs\n"


async def test_file_edited_after_the_preview_is_refused(host, model, ws):
    ws.mkdir()
    (ws / "todo.md").write_text("one\n")
    await call(host, model, "read_file", {"path": "todo.md"})
    approval_id = await held(host, model, "write_file", {"path": "todo.md", "content": "two\n"})
    (ws / "todo.md").write_text("edited by hand\n")
    out = await host.say(f"/approve {approval_id}")
    assert "changed since" in out and "nothing was written" in out  # the owner is told
    assert (ws / "todo.md").read_text() == "edited by hand\n"
    assert (await Approvals(host.gw.store).get(approval_id)).state == "failed"


async def test_file_created_after_the_preview_is_refused(host, model, ws):
    approval_id = await held(host, model, "write_file", {"path": "new.md", "content": "mine\n"})
    ws.mkdir(exist_ok=True)
    (ws / "new.md").write_text("someone else's\n")
    await host.say(f"/approve {approval_id}")
    assert (ws / "new.md").read_text() == "someone else's\n"


async def test_write_outside_the_roots_is_refused_naming_them(host, model, ws, tmp_path):
    result = await call(host, model, "write_file", {"path": str(tmp_path / "elsewhere.txt"), "content": "x"})
    assert "outside the directories" in result and str(ws) in result and str(tmp_path / "extra") in result
    result = await call(host, model, "write_file", {"path": "../escape.txt", "content": "x"})
    assert "outside the directories" in result
    ws.mkdir(exist_ok=True)
    os.symlink(tmp_path, ws / "link")
    result = await call(host, model, "write_file", {"path": "link/evil.txt", "content": "x"})
    assert "outside the directories" in result
    assert await pending(host) == [] and not (tmp_path / "elsewhere.txt").exists()
    # a write root is allowed
    (tmp_path / "extra").mkdir()
    await held(host, model, "write_file", {"path": str(tmp_path / "extra" / "ok.txt"), "content": "x"})


async def test_pending_write_survives_a_restart_and_runs_once(start_console, host_config, model, ws):
    cfg = host_config()
    first = await start_console(cfg)
    approval_id = await held(first, model, "write_file", {"path": "a.txt", "content": "A\n"})
    await first.gw.stop()
    second = await start_console(cfg)
    await second.say(f"/approve {approval_id}")
    await second.say(f"/approve {approval_id}")
    assert (ws / "a.txt").read_text() == "A\n"
    assert (await Approvals(second.gw.store).get(approval_id)).state == "succeeded"


async def test_patch_keeps_crlf_and_wants_a_unique_match(host, model, ws):
    ws.mkdir()
    (ws / "w.txt").write_bytes(b"a\r\nb\r\na\r\n")
    await call(host, model, "read_file", {"path": "w.txt"})
    result = await call(host, model, "patch", {"path": "w.txt", "old_text": "a", "new_text": "z"})
    assert "matches 2 places" in result and await pending(host) == []
    approval_id = await held(host, model, "patch", {"path": "w.txt", "old_text": "b\na", "new_text": "B\nA"})
    await host.say(f"/approve {approval_id}")
    assert (ws / "w.txt").read_bytes() == b"a\r\nB\r\nA\r\n"


async def test_search_files_finds_lines_and_names(host, model, ws):
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "a.md").write_text("alpha\nTODO call mum\n")
    (ws / "notes" / "b.txt").write_text("nothing\n")
    (ws / ".hidden").write_text("TODO secret\n")
    result = await call(host, model, "search_files", {"pattern": "todo", "ignore_case": True})
    assert "notes/a.md:2: TODO call mum" in result and "secret" not in result
    result = await call(host, model, "search_files", {"glob": "*.txt"})
    assert "notes/b.txt" in result and "a.md" not in result


# -- terminal ---------------------------------------------------------------------------------------


async def test_read_only_commands_run_directly_and_are_audited(host, model, ws):
    ws.mkdir()
    (ws / "hello.txt").write_text("hi\n")
    result = await call(host, model, "bash", {"command": "ls"})
    assert "exit code 0" in result and "hello.txt" in result and "duration" in result
    os.system(f"git init -q {ws}")
    result = await call(host, model, "bash", {"command": "git status --short"})
    assert "exit code 0" in result and "?? hello.txt" in result
    assert await pending(host) == []
    runs = [e for e in await Audit(host.gw.store).list() if e.tool == "bash"]
    assert [e.action for e in runs] == ["tool.run", "tool.run"]


@pytest.mark.parametrize("command", ["ls; rm x", "echo $(id)", "ls *", "rm x", "ls ~"])
async def test_commands_beyond_the_allowlist_are_held(host, model, ws, command):
    ws.mkdir()
    (ws / "x").write_text("keep me")
    await held(host, model, "bash", {"command": command})
    rec = (await pending(host))[0]
    assert rec.execution == "change_plan" and f"$ {command}" in rec.preview and str(ws) in rec.preview
    assert "timeout: 120 s" in rec.preview
    assert (ws / "x").exists()


async def test_destructive_command_is_force_change_plan_even_with_an_allow_all_hook(start_console, host_config,
                                                                                  model, ws, fake_home):
    harness = await start_console(host_config(approvals={"hook": "tests.support.hooks:allow_all"}))
    result = await call(harness, model, "bash", {"command": "echo hooked > hooked.txt"})
    assert "exit code 0" in result and (ws / "hooked.txt").exists()  # the hook can wave an ordinary command through
    await held(harness, model, "bash", {"command": "rm -rf ~"})
    rec = (await pending(harness))[0]
    assert rec.execution == "force_change_plan" and "DESTRUCTIVE" in rec.preview
    assert (fake_home / "keep").read_text() == "precious"


async def test_env_of_an_approved_command_has_no_configured_secret(start_console, host_config, model, monkeypatch):
    secrets_env = {"MY_LLM_CREDENTIAL": "sk-model-111", "TELEGRAM_BOT_TOKEN": "tg-222", "ANYY_EMAIL_PASSWORD": "pw-333",
                   "SOME_API_KEY": "key-444", "COPY_OF_IT": "sk-model-111", "HARMLESS_SETTING": "visible-555"}
    for k, v in secrets_env.items():
        monkeypatch.setenv(k, v)
    cfg = host_config(model={"api_key_env": "MY_LLM_CREDENTIAL"}, telegram={"allowed_users": [1]})
    harness = await start_console(cfg)
    approval_id = await held(harness, model, "bash", {"command": "env"})
    out = await harness.say(f"/approve {approval_id}")
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec.state == "succeeded" and "visible-555" in rec.result
    for value in ("sk-model-111", "tg-222", "pw-333", "key-444"):
        assert value not in rec.result and value not in out


async def test_background_job_poll_log_kill_and_lost_after_restart(start_console, host_config, model, ws):
    cfg = host_config()
    harness = await start_console(cfg)
    script = "echo started; sleep 0.2; echo tick; sleep 60"
    approval_id = await held(harness, model, "bash", {"command": script, "background": True})
    await harness.say(f"/approve {approval_id}")
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec.state == "succeeded" and "started process" in rec.result
    pid = rec.result.split("started process ")[1].split()[0]
    for _ in range(100):
        result = await call(harness, model, "process", {"action": "log", "id": pid})
        if "started\ntick" in result:
            break
        await asyncio.sleep(0.05)
    assert "[running]" in result and "started\ntick" in result
    result = await call(harness, model, "process", {"action": "poll", "id": pid})
    assert "started" in result
    assert "(no new output)" in await call(harness, model, "process", {"action": "poll", "id": pid})
    kill_id = await held(harness, model, "process", {"action": "kill", "id": pid})
    assert "[running]" in await call(harness, model, "process", {"action": "poll", "id": pid})
    await harness.say(f"/approve {kill_id}")
    assert "[killed" in await call(harness, model, "process", {"action": "poll", "id": pid})
    # a second job is running when the gateway goes away without stopping it (a crash)
    second = await call(harness, model, "bash", {"command": "tail -f /dev/null", "background": True})
    pid2 = second.split("started process ")[1].split()[0]
    term = harness.gw.services["terminal"]
    job = term.job(pid2)
    term._live.clear()  # forget it, as a crashed process would
    await harness.gw.stop()
    await job.stop()
    again = await start_console(cfg)
    result = await call(again, model, "process", {"action": "poll", "id": pid2})
    assert "[lost]" in result and "no longer supervised" in result
    listing = await call(again, model, "process", {"action": "list"})
    assert f"{pid} [killed" in listing and f"{pid2} [lost]" in listing


async def test_shutdown_stops_background_jobs(start_console, host_config, model):
    harness = await start_console(host_config())
    result = await call(harness, model, "bash", {"command": "tail -f /dev/null", "background": True})
    pid = result.split("started process ")[1].split()[0]
    os_pid = harness.gw.services["terminal"].job(pid).pid
    await harness.gw.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(os_pid, 0)
    again = await start_console(host_config())
    assert "[stopped" in await call(again, model, "process", {"action": "poll", "id": pid})


async def test_another_sessions_processes_are_invisible(host, model):
    result = await call(host, model, "bash", {"command": "tail -f /dev/null", "background": True})
    pid = result.split("started process ")[1].split()[0]
    other = RecordingContext(store=host.gw.store, session_id="telegram:999", services=host.gw.services)
    for action in ("poll", "log", "kill", "submit"):
        with pytest.raises(ToolError, match="no process"):
            await process.call(other, process.args_model(action=action, id=pid, input="x"))
    assert "No background processes" in await process.call(other, process.args_model(action="list"))
    assert host.gw.services["terminal"].job(pid).exit_code is None  # still running


async def test_terminal_disabled_removes_the_toolset(start_console, host_config, model):
    harness = await start_console(host_config(terminal={"enabled": False}))
    result = await call(harness, model, "bash", {"command": "ls"}, text="run the command ls")
    assert "unknown tool" in result
