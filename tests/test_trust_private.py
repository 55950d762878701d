"""Reads that would hand the model a secret never run unseen: a process's /proc entries (the resident's
environment holds the model API key), Anyy's data directory (the store) and config file. Through the
real gateway: the terminal holds such a read for the owner, the file tools refuse it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors.private_paths import PrivatePaths
from tests.support.host import call, pending

pytestmark = pytest.mark.usefixtures("fake_home")  # commands run for real: never in the real home


@pytest.fixture
async def host(start_console, make_config, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("notes\n")
    (ws / "env-link").symlink_to(f"/proc/{os.getpid()}/environ")
    return await start_console(make_config(workspace={"root": str(ws)}))


PID = os.getpid()
HELD = [f"cat /proc/{PID}/environ", f"head -c 4000 /proc/{PID}/environ", f"cat /proc/{PID}/cmdline",
        f"tail /proc/{PID}/mem", "cat /proc/self/environ", f"cat /proc/{PID}/task/{PID}/environ",
        f"cat /proc//{PID}/./environ", f"grep -a KEY /proc/{PID}/environ", f"wc -c /proc/{PID}/environ",
        f"cat /proc/{PID}/fd/0", "cat env-link", f"grep -r -a KEY /proc/{PID}", "grep -r KEY /",
        "rg KEY /proc", "grep --file=/proc/self/environ notes.md", f"git diff --no-index /proc/{PID}/environ notes.md",
        "grep -R notes .", "rg -L notes ."]


@pytest.mark.parametrize("command", HELD)
async def test_reads_of_process_entries_wait_for_the_owner(host, model, command: str) -> None:
    result = await call(host, model, "bash", {"command": command})
    assert "Awaiting approval" in result, result
    [rec] = await pending(host)
    assert rec.tool == "bash" and command in rec.preview


async def test_reads_of_the_store_and_data_directory_wait_for_the_owner(host, model, tmp_path: Path) -> None:
    store = host.gw.config.store_path
    for command in (f"cat {store}", f"head -c 100 {store}", f"grep -r owner {store.parent}", f"ls {store.parent}"):
        result = await call(host, model, "bash", {"command": command})
        assert "Awaiting approval" in result, (command, result)
    assert len(await pending(host)) == 4


async def test_ordinary_reads_still_run_at_once(host, model) -> None:
    for command in ("cat notes.md", "grep -rn notes .", "ls -la", "df -h", "cat /proc/loadavg", "du -sh ."):
        result = await call(host, model, "bash", {"command": command})
        assert "exit code 0" in result, (command, result)
    assert await pending(host) == []


@pytest.mark.parametrize("path", [f"/proc/{PID}/environ", "/proc/self/environ", "env-link", f"/proc/{PID}/cmdline"])
async def test_read_file_refuses_process_entries(host, model, path: str) -> None:
    result = await call(host, model, "read_file", {"path": path})
    assert "refused" in result and "/proc entry" in result and "<untrusted" not in result


async def test_read_file_refuses_the_store_and_search_files_skips_what_leads_there(host, model, tmp_path) -> None:
    store = host.gw.config.store_path
    result = await call(host, model, "read_file", {"path": str(store)})
    assert "refused" in result and "Anyy's own files" in result
    result = await call(host, model, "search_files", {"pattern": "owner", "path": str(store.parent)})
    assert "refused" in result
    result = await call(host, model, "search_files", {"pattern": "PATH=", "path": "."})  # env-link is skipped
    assert "PATH=" not in result
    assert "notes.md" in await call(host, model, "read_file", {"path": "notes.md"})


def test_a_workspace_inside_the_data_directory_stays_readable(tmp_path: Path) -> None:
    data, ws = tmp_path / "data", tmp_path / "data" / "workspace"
    ws.mkdir(parents=True)
    paths = PrivatePaths([data], [ws])
    assert paths.refusal(".", ws, recursive=True) is None and paths.refusal("notes.md", ws) is None
    assert "inside Anyy's own files" in (paths.refusal("../anyy.db", ws) or "")
    assert "contains Anyy's own files" in (paths.refusal(str(tmp_path), ws, recursive=True) or "")
    assert paths.refusal(str(tmp_path), ws) is None  # listing the folder that holds it is not reading it


SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(), reason="needs root to run as nobody")
def test_the_resident_keeps_its_environment_from_same_user_processes(tmp_path: Path) -> None:
    """A process that called `protect_this_process` (as `anyy run` and `anyy chat` do) cannot have its
    environment read by another process of the same user; the control without it can."""
    import shutil
    import tempfile

    # `nobody` may not be able to enter the checkout (a clone in a 0700 folder) nor pytest's tmp_path (0700,
    # ours): the module it runs is copied to a folder of its own that any user can read.
    readable = Path(tempfile.mkdtemp(prefix="anyy-as-nobody-"))
    try:
        package = readable / "connectors"
        package.mkdir()
        for name in ("__init__.py", "private_paths.py"):
            shutil.copyfile(Path(__file__).resolve().parents[1] / "connectors" / name, package / name)
            (package / name).chmod(0o644)
        package.chmod(0o755)
        readable.chmod(0o755)
        outcomes = _environ_readable_as_nobody(readable)
    finally:
        shutil.rmtree(readable)
    assert outcomes == {False: True, True: False}


def _environ_readable_as_nobody(pythonpath: Path) -> dict[bool, bool]:
    """Whether a `nobody` process can read the environment of another `nobody` process, without and with
    `protect_this_process`."""
    import subprocess

    env = {"PYTHONPATH": str(pythonpath), "ANYY_TEST_MODEL_KEY": "sk-secret-in-environ", "PATH": "/usr/bin:/bin"}
    outcomes = {}
    for protect in (False, True):
        code = ("import sys, time\nfrom connectors.private_paths import protect_this_process\n"
                f"ok = protect_this_process() if {protect} else True\nprint(ok, flush=True)\ntime.sleep(30)\n")
        proc = subprocess.Popen([SYSTEM_PYTHON, "-c", code], env=env, user="nobody", stdout=subprocess.PIPE, text=True,
                                cwd=pythonpath)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
            read = subprocess.run(["cat", f"/proc/{proc.pid}/environ"], user="nobody", capture_output=True)
            outcomes[protect] = b"sk-secret-in-environ" in read.stdout
        finally:
            proc.kill()
            proc.wait()
    return outcomes
