"""Host tools below the approval flow: config, the call-policy mechanism, the environment scrub, the
process runner, and the bubblewrap sandbox (real bwrap, real sockets on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from connectors import processes
from connectors.processes import Settings, scrub_env
from gateway.approvals.policy import effective_descriptor
from gateway.config import ConfigError, GovernanceConfig, ToolOverride, parse_config
from tests.fixtures.model import reply, tool_call
from tests.support.listeners import record_connections
from toolsets.base import ApprovalPolicy, Descriptor, ExecutionPolicy
from toolsets.terminal import bash

pytestmark = pytest.mark.usefixtures("fake_home")  # commands run here for real: never in the real home


def test_config_sections_and_their_errors():
    cfg = parse_config({"workspace": {"root": "~/anyy-workspace", "write_roots": ["/srv/notes"]},
                        "terminal": {"sandbox": "bwrap", "network": False, "timeout_s": 30,
                                     "allowlist": [{"program": "make", "subcommand": "test"}]}})
    assert cfg.workspace_root == Path.home() / "anyy-workspace" and cfg.terminal.allowlist[0].program == "make"
    default = parse_config({})
    assert default.workspace_root == default.data_dir / "workspace" and default.terminal.enabled
    with pytest.raises(ConfigError, match=r"\[terminal\].*network = false needs sandbox"):
        parse_config({"terminal": {"network": False}})
    with pytest.raises(ConfigError, match=r"\[terminal.allowlist.0.programme\] unknown key"):
        parse_config({"terminal": {"allowlist": [{"programme": "make"}]}})
    with pytest.raises(ConfigError, match=r"\[terminal.sandbox\]"):
        parse_config({"terminal": {"sandbox": "docker"}})


def test_secret_env_names_come_from_every_env_key():
    cfg = parse_config({"model": {"api_key_env": "LLM"}, "telegram": {"token_env": "TG"},
                        "email": {"imap_host": "h", "smtp_host": "h", "username": "u", "from_address": "a@b.c",
                                  "password_env": "MAILPW"}})
    assert {"LLM", "TG", "MAILPW", "TELEGRAM_WEBHOOK_SECRET"} <= cfg.secret_env_names()


def test_scrub_env_removes_named_secrets_credential_names_and_copies():
    env = {"LLM": "s1", "GITHUB_TOKEN": "t", "AWS_SECRET": "x", "DB_PASSWORD_FILE": "p", "my_key": "k",
           "ALIAS": "s1", "PATH": "/usr/bin", "KEYBOARD": "us"}
    assert scrub_env(env, {"LLM"}) == {"PATH": "/usr/bin", "KEYBOARD": "us"}


def test_call_policy_tightens_or_loosens_change_plan_to_audit_only():
    plan = Descriptor(execution=ExecutionPolicy.CHANGE_PLAN, approval=ApprovalPolicy.HOOK)
    audit = plan.for_call(ExecutionPolicy.AUDIT)
    assert audit.execution is ExecutionPolicy.AUDIT and audit.approval is ApprovalPolicy.NONE
    assert plan.for_call(ExecutionPolicy.DIRECT).execution is ExecutionPolicy.CHANGE_PLAN  # never to direct
    assert plan.for_call(ExecutionPolicy.FORCE_CHANGE_PLAN).execution is ExecutionPolicy.FORCE_CHANGE_PLAN
    force = Descriptor(execution=ExecutionPolicy.FORCE_CHANGE_PLAN)
    assert force.for_call(ExecutionPolicy.AUDIT) == force
    always = Descriptor(execution=ExecutionPolicy.CONFIRM, approval=ApprovalPolicy.ALWAYS)
    assert always.for_call(ExecutionPolicy.AUDIT) == always  # "always ask" means always
    confirm = Descriptor(execution=ExecutionPolicy.CONFIRM)
    assert confirm.for_call(ExecutionPolicy.AUDIT).execution is ExecutionPolicy.AUDIT  # skill_manage reload
    # a governance override still tightens what the call policy loosened
    gov = GovernanceConfig(overrides={"bash": ToolOverride(execution="change_plan")})
    assert effective_descriptor(bash, gov, audit).execution is ExecutionPolicy.CHANGE_PLAN


async def test_runner_times_out_stops_the_group_and_bounds_output(tmp_path):
    settings = Settings(workspace=tmp_path, writable=(tmp_path,), hidden=(), secret_names=frozenset())
    res = await processes.run(settings, ["bash", "-c", "sleep 600 & echo $! > child; sleep 30"], tmp_path,
                              tmp_path / "out.log", timeout_s=0.5, max_bytes=1000)
    assert res.timed_out and res.exit_code is not None and res.duration_s < 10
    child = Path(f"/proc/{int((tmp_path / 'child').read_text())}")
    # run() returns once bash has exited; the SIGTERM'd background sleep exits when the scheduler gets to
    # it, which on a loaded machine can be well after a fixed 0.1 s. (It sleeps far past the deadline, so
    # a group that was not stopped cannot pass by ending on its own.)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while _running(child):
        assert loop.time() < deadline, f"{child} still runs after its group was stopped"
        await asyncio.sleep(0.05)
    res = await processes.run(settings, ["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' a; echo; echo END"],
                              tmp_path, tmp_path / "out2.log", timeout_s=10, max_bytes=1000)
    assert res.exit_code == 0 and res.output.truncated and res.output.total_bytes == 5005
    assert res.output.text.endswith("END\n") and "bytes of output omitted" in res.output.text
    assert not (tmp_path / "out2.log").exists()


def _running(proc: Path) -> bool:
    """Whether the /proc entry is a live process (not gone, not a zombie waiting to be reaped)."""
    try:
        return "Z" not in (proc / "stat").read_text().split()[2]
    except FileNotFoundError:
        return False


# -- the sandbox ---------------------------------------------------------------------------------------

@pytest.fixture
def outside():
    """A directory outside the workspace, the data directory and /tmp (which the sandbox replaces)."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="anyy-outside-"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 that accepts connections: the network a sandboxed command must not reach."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    accepted = record_connections(srv)
    yield srv.getsockname()[1], accepted
    srv.close()


async def run_allowed(start_console, config, model, command: str) -> str:
    harness = await start_console(config)
    model.script(tool_call("bash", {"command": command}), reply("ok"))
    await harness.say("run the command")
    return [m["content"] for r in model.requests for m in r.messages if m["role"] == "tool"][-1]


CONNECT = ("python3 -c \"import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2); "
           "print('CONNECTED')\"")


async def test_sandbox_blocks_writes_outside_the_workspace_and_the_network(start_console, make_config, model,
                                                                         tmp_path, listener, outside):
    port, accepted = listener
    cfg = make_config(workspace={"root": str(tmp_path / "ws")}, approvals={"hook": "tests.support.hooks:allow_all"},
                      terminal={"sandbox": "bwrap", "network": False})
    result = await run_allowed(start_console, cfg, model,
                               f"echo in > inside.txt; echo out > {outside}/x.txt; cat {tmp_path}/anyy.db | wc -c; "
                               f"{CONNECT} {port}")
    assert (tmp_path / "ws" / "inside.txt").read_text() == "in\n"
    assert not (outside / "x.txt").exists() and "Read-only file system" in result
    assert "No such file" in result  # the data directory (the store) is hidden
    assert "CONNECTED" not in result and accepted == []


async def test_without_the_sandbox_the_same_command_reaches_both(start_console, make_config, model, tmp_path, listener,
                                                                 outside):
    """The control for the test above: the probes do succeed when nothing stops them."""
    port, accepted = listener
    cfg = make_config(workspace={"root": str(tmp_path / "ws")}, approvals={"hook": "tests.support.hooks:allow_all"},
                      terminal={"sandbox": "bwrap", "network": True})
    result = await run_allowed(start_console, cfg, model, f"{CONNECT} {port}")
    assert "CONNECTED" in result and accepted == [True]
    cfg = make_config(workspace={"root": str(tmp_path / "ws")}, approvals={"hook": "tests.support.hooks:allow_all"})
    await run_allowed(start_console, cfg, model, f"echo out > {outside}/x.txt")
    assert (outside / "x.txt").read_text() == "out\n"


def test_atomic_write_rechecks_the_hash_right_before_the_rename(tmp_path):
    from connectors.workspace import Workspace, WorkspaceError, file_hash

    (tmp_path / "w").mkdir()
    target = tmp_path / "w" / "f.txt"
    target.write_text("v1")
    seen = file_hash(target)
    target.write_text("v2")  # changed between the check and the write
    with pytest.raises(WorkspaceError, match="changed since"):
        Workspace.write_atomic(target, b"mine", seen)
    with pytest.raises(WorkspaceError, match="appeared"):
        Workspace.write_atomic(target, b"mine", None)  # "create" must not clobber what appeared
    assert target.read_text() == "v2" and sorted(p.name for p in target.parent.iterdir()) == ["f.txt"]
    Workspace.write_atomic(target, b"v3", file_hash(target))
    assert target.read_text() == "v3"


def test_a_new_file_gets_the_umask_mode_and_an_existing_one_keeps_its_own(tmp_path):
    from connectors.workspace import Workspace, file_hash

    previous = os.umask(0o027)
    try:
        Workspace.write_atomic(tmp_path / "new.txt", b"hello", None)
        assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640  # not mkstemp's 0600
    finally:
        os.umask(previous)
    kept = tmp_path / "script.sh"
    kept.write_text("echo 1")
    kept.chmod(0o750)
    Workspace.write_atomic(kept, b"echo 2", file_hash(kept))
    assert kept.stat().st_mode & 0o777 == 0o750
