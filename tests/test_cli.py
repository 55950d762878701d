"""The `anyy` command as a person runs it: real subprocesses, the fake model over HTTP."""

from __future__ import annotations

import asyncio

from tests.fixtures.model import hang
from tests.support.cli import ANYY, SUBPROCESS_S, anyy, model_config, write_config
from tests.support.crash import Child


async def test_piped_chat_prints_each_reply_in_order_and_exits(tmp_path, home, model):
    cfg = model_config(tmp_path, model)
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="hello\n/tasks\nbye\n")
    assert code == 0, err
    assert out.splitlines() == ["echo: hello", "No open tasks.", "echo: bye"]


async def test_chat_without_a_model_says_which_setting_to_set(tmp_path, home):
    code, out, err = await anyy("chat", env=home, stdin="hi\n/help\n")
    assert code == 0, err
    assert "No model is configured yet: run `anyy setup model`" in out
    assert "/remind" in out


async def test_a_bad_config_is_one_clear_message(tmp_path, home):
    cfg = write_config(tmp_path, '[model]\ntimeout_s = "soon"\nprovidr = "x"\n[runtime]\ntimezone = "Mars/Base"\n')
    code, _, err = await anyy("chat", "--config", cfg, env=home)
    assert code == 2
    assert "[model.timeout_s]" in err and "[model.providr] unknown key" in err and "Mars/Base" in err
    assert "Traceback" not in err
    code, _, err = await anyy("chat", "--config", str(tmp_path / "missing.toml"), env=home)
    assert code == 2 and "does not exist" in err
    bad = write_config(tmp_path, "[model\n")
    code, _, err = await anyy("doctor", "--config", bad, env=home)
    assert code == 2 and "not valid TOML" in err


async def test_doctor_explains_a_missing_model(tmp_path, home):
    code, out, _ = await anyy("doctor", env=home)
    assert code == 1
    assert "✗ model: not configured: set [model] base_url and model" in out
    assert "✓ store:" in out


async def test_doctor_passes_with_a_reachable_model(tmp_path, home, model):
    code, out, _ = await anyy("doctor", "--config", model_config(tmp_path, model), env=home)
    assert "✓ model: openai" in out, out
    assert code == 0


async def test_tools_catalog_as_json(tmp_path, home):
    import json

    _, out, _ = await anyy("tools", "--json", env=home)
    rows = json.loads(out)
    by_name = {r["tool"]: r for r in rows}
    assert by_name["task_create"]["execution"] == "audit"
    assert by_name["email_send"]["execution"] == "confirm" and by_name["email_send"]["available"] is False


async def test_a_second_resident_process_refuses_and_sigterm_stops_gracefully(tmp_path, home):
    first = Child(await asyncio.create_subprocess_exec(*ANYY, "run", env=home, stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.PIPE))
    try:
        # Printed once it holds the lock and has started; a bounded poll of the lock file used to give up
        # after ~10 s and let the second process race the first for it on a slow machine.
        await first.wait_for_stderr("No chat surface is configured")
        code, _, err = await anyy("run", env=home)
        assert code == 1 and "another Anyy process" in err and str(first.process.pid) in err
    finally:
        stopped = await first.terminate()
    assert stopped == 0, "".join(first.stderr_lines)


async def test_a_turn_killed_mid_flight_is_answered_once_after_restart(tmp_path, home, model):
    cfg = model_config(tmp_path, model)
    model.script(hang(30))
    proc = await asyncio.create_subprocess_exec(*ANYY, "chat", "--config", cfg, env=home,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    await model.wait_for_requests(1, timeout=SUBPROCESS_S)
    proc.kill()  # mid-turn: the model call is in flight
    await proc.wait()
    model.reset()
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="")
    assert code == 0, err
    assert out.splitlines() == ["echo: hello"]
    code, out, _ = await anyy("chat", "--config", cfg, env=home, stdin="")
    assert out == ""  # answered once: nothing left to re-run
