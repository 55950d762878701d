"""The terminal's bounds, through the real gateway: a background command's timeout is applied as its
preview says, a read-only command cannot fill the disk with output, and background processes are
counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.approvals import Approvals
from tests.support.host import call, pending
from toolsets.jobs import MAX_BACKGROUND
from toolsets.terminal import ALLOWLISTED_OUTPUT_BYTES

pytestmark = pytest.mark.usefixtures("fake_home")  # commands run for real: never in the real home


@pytest.fixture
async def host(start_console, make_config, tmp_path: Path):
    return await start_console(make_config(workspace={"root": str(tmp_path / "ws")}))


def _id(result: str) -> str:
    return result.split("started process ")[1].split()[0]


async def _ended(host, model, pid: str) -> str:
    for _ in range(60):
        result = await call(host, model, "process", {"action": "wait", "id": pid})
        if "[running]" not in result:
            return result
    raise AssertionError(result)


async def test_a_background_commands_timeout_is_applied(host, model) -> None:
    started = await call(host, model, "bash", {"command": "tail -f /dev/null", "background": True, "timeout_s": 0.5})
    pid = _id(started)
    assert "stopped after 0.5 s" in started, started
    result = await _ended(host, model, pid)
    assert f"{pid} [timed_out" in result
    assert host.gw.services["terminal"].job(pid) is None


async def test_the_preview_of_a_background_command_says_what_will_happen(host, model) -> None:
    await call(host, model, "bash", {"command": "sleep 100 && echo done", "background": True})
    await call(host, model, "bash", {"command": "sleep 100 && echo done", "background": True, "timeout_s": 5})
    first, second = sorted(await pending(host), key=lambda a: a.created_at)
    assert "timeout: none, runs until stopped · in the background" in first.preview
    assert "timeout: 5 s · in the background" in second.preview
    await host.say(f"/approve {second.id}")
    rec = await Approvals(host.gw.store).get(second.id)
    assert "stopped after 5 s" in rec.result, rec.result


async def test_read_only_output_cannot_fill_the_disk(host, model) -> None:
    result = await call(host, model, "bash", {"command": "head -c 100G /dev/zero"})
    assert f"stopped at the output limit of {ALLOWLISTED_OUTPUT_BYTES // 2**20} MB" in result
    started = await call(host, model, "bash", {"command": "cat /dev/zero", "background": True})
    result = await _ended(host, model, _id(started))
    assert "output limit" in result
    log = Path(host.gw.services["terminal"].log_path(_id(started)))
    assert log.stat().st_size <= ALLOWLISTED_OUTPUT_BYTES


async def test_background_processes_are_counted(host, model) -> None:
    for _ in range(MAX_BACKGROUND):
        assert "started process" in await call(host, model, "bash", {"command": "tail -f /dev/null",
                                                                       "background": True})
    result = await call(host, model, "bash", {"command": "tail -f /dev/null", "background": True})
    assert f"{MAX_BACKGROUND} background processes are running" in result
