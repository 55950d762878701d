"""Issue 19: `anyy run` serves the dashboard in its own event loop, `anyy dashboard url` logs in to it,
and a dashboard that cannot bind is reported without taking the assistant down. Real subprocesses."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from pathlib import Path

import aiohttp

from tests.support.cli import SUBPROCESS_S, anyy
from tests.support.resident import Resident, resident, run_config


async def wait_for_output(proc: Resident, text: str, timeout: float = SUBPROCESS_S) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while text not in (out := proc.output()):
        assert proc.process.returncode is None, out
        assert loop.time() < deadline, f"{text!r} not in the output within {timeout}s: {out}"
        await asyncio.sleep(0.05)
    return out


async def test_anyy_run_serves_the_dashboard_and_the_url_logs_in(model, tmp_path: Path):
    # Port 0, not a port picked beforehand: that one can be taken by anything else on the machine while
    # `anyy run` starts (seconds on a loaded box). The resident says which port it bound.
    config = run_config(tmp_path, model, "", dashboard_listen="127.0.0.1:0")
    async with resident(tmp_path, config, {}) as proc:
        up = re.search(r"dashboard: up on 127\.0\.0\.1:(\d+)", await wait_for_output(proc, "prints the login link"))
        assert up, proc.output()
        port = int(up.group(1))
        run_config(tmp_path, model, "", dashboard_listen=f"127.0.0.1:{port}")  # the config naming that port
        env = {**os.environ, "ANYY_HOME": str(tmp_path / "home")}
        code, out, err = await anyy("dashboard", "url", "--config", str(config), env=env)
        assert code == 0, err
        url = out.strip()
        token = url.split("token=", 1)[1]
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
            async with client.get(f"http://127.0.0.1:{port}/dashboard/tools") as r:
                assert r.status == 401
            async with client.get(url) as r:
                assert r.status == 200 and "url=/dashboard/" in await r.text()
            async with client.get(f"http://127.0.0.1:{port}/dashboard/tools") as r:
                assert r.status == 200 and 'id="tool-email_send"' in await r.text()
        assert await proc.terminate() == 0
    assert token not in proc.output()  # the login URL is never logged (aiohttp's access log is off)


async def test_a_taken_port_is_reported_and_the_rest_keeps_running(model, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = run_config(tmp_path, model, "", dashboard_listen=f"127.0.0.1:{port}")
        async with resident(tmp_path, config, {}) as proc:
            out = await wait_for_output(proc, "dashboard: down:")
            assert "running the scheduler only" in await wait_for_output(proc, "running the scheduler only")
            assert proc.process.returncode is None
            assert await proc.terminate() == 0
    assert "Traceback" not in out
