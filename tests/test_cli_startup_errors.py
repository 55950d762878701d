"""Start-up errors are a few lines naming the config key, never a traceback; doctor names them too."""

from __future__ import annotations

import pytest

from tests.support.cli import anyy, write_config

BAD_HOOK = '[approvals]\nhook = "missing_mod:decide"\n'


@pytest.mark.parametrize("command", ["chat", "run"])
async def test_a_bad_hook_stops_chat_and_run_with_one_line(tmp_path, home, command):
    cfg = write_config(tmp_path, BAD_HOOK)
    code, _, err = await anyy(command, "--config", cfg, env=home, stdin="hi\n")
    assert code == 2
    assert "[approvals] hook 'missing_mod:decide' cannot be loaded" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3, err


async def test_doctor_fails_on_a_bad_hook(tmp_path, home):
    code, out, err = await anyy("doctor", "--config", write_config(tmp_path, BAD_HOOK), env=home)
    assert code == 1 and "Traceback" not in err
    assert "✗ approvals: [approvals] hook 'missing_mod:decide' cannot be loaded" in out
    assert "All good." not in out


async def test_a_store_path_that_cannot_be_created(tmp_path, home):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = write_config(tmp_path, f'[store]\npath = "{blocker}/sub/anyy.db"\n')
    code, out, err = await anyy("doctor", "--config", cfg, env=home)
    assert code == 1 and "Traceback" not in err
    assert f"✗ store: [store] path: cannot create {blocker}/sub" in out
    for command in ("chat", "run"):
        code, _, err = await anyy(command, "--config", cfg, env=home, stdin="hi\n")
        assert code == 2 and "[store] path" in err and "Traceback" not in err, err
    code, _, err = await anyy("audit", "--config", cfg, env=home)
    assert code == 1 and "[store] path" in err and "Traceback" not in err, err
