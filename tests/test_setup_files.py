"""The files setup keeps for the owner: secrets.env (0600 from the moment it exists, loaded by every `anyy`
command with the environment winning), what `anyy doctor` says of readable files, and the texts the wizard
prints or installs staying the same as the docs'."""

from __future__ import annotations

import ast
import asyncio
import re
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.config.secrets_file import SecretsError, load_secrets, read_secrets, save_secrets
from gateway.setup.host_steps import UNIT
from gateway.setup.slack_step import manifest
from tests.support.cli import anyy, model_config
from tests.support.resident import resident
from tests.test_deploy_unit import unit_text

ROOT = Path(__file__).resolve().parent.parent

# Runs save_secrets with umask 0 (so nothing but the code's own mode keeps the file private) and notes the
# mode of every file in the folder at every audit event the interpreter raises while it works: the
# create, the write, the rename. A file that was ever readable by others shows up in the notes.
WATCH = textwrap.dedent("""
    import os, stat, sys
    from pathlib import Path
    from gateway.config.secrets_file import save_secrets
    folder = Path(sys.argv[1])
    seen, busy = set(), []
    def note(event, args):
        if busy or not event.startswith(("open", "os.", "shutil.")):
            return
        busy.append(1)  # what the note itself does raises audit events too
        try:
            for p in folder.iterdir() if folder.exists() else ():
                try:
                    seen.add((p.name[:1], stat.S_IMODE(p.lstat().st_mode)))
                except OSError:
                    pass
        finally:
            busy.pop()
    os.umask(0)
    sys.addaudithook(note)
    save_secrets(folder / "secrets.env", {"A_KEY": "one"})
    save_secrets(folder / "secrets.env", {"A_KEY": "two", "B_KEY": "it's 'quoted' $x"})
    print(sorted(seen))
""")


async def test_secrets_env_is_owner_only_from_its_creation(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WATCH, str(folder), cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    modes = {mode for _, mode in ast.literal_eval(out.decode())}
    assert modes == {0o600}, [oct(m) for m in modes]  # the temporary file and secrets.env: never wider
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert read_secrets(folder / "secrets.env") == {"A_KEY": "two", "B_KEY": "it's 'quoted' $x"}
    assert [p.name for p in folder.iterdir()] == ["secrets.env"]  # no temporary file left behind


def test_save_keeps_comments_and_other_lines_and_the_shell_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("# mine\nOTHER=keep\nA_KEY=old\n")
    save_secrets(path, {"A_KEY": "new value", "C_KEY": "x"})
    assert path.read_text() == "# mine\nOTHER=keep\nA_KEY='new value'\nC_KEY=x\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # rewritten files are 0600 too
    with pytest.raises(SecretsError, match="line 2: expected NAME=value"):
        path.write_text("OK=1\nthis is not a variable\n")
        read_secrets(path)
    with pytest.raises(SecretsError, match="cannot span lines"):
        save_secrets(tmp_path / "other.env", {"K": "a\nb"})


def test_save_refuses_a_name_that_is_not_a_variable_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("A_KEY=old\n")
    with pytest.raises(SecretsError, match=r"'ANYY_MY-WORK_CLIENT_SECRET' is not a variable name.*nothing was written"):
        save_secrets(path, {"A_KEY": "new", "ANYY_MY-WORK_CLIENT_SECRET": "x"})
    assert read_secrets(path) == {"A_KEY": "old"}  # the file still reads: every `anyy` command loads it


def test_the_environment_wins_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secrets.env"
    save_secrets(path, {"ANYY_T_SET": "from-file", "ANYY_T_UNSET": "from-file"})
    monkeypatch.setenv("ANYY_T_SET", "from-env")
    monkeypatch.delenv("ANYY_T_UNSET", raising=False)
    assert load_secrets(path) == ["ANYY_T_UNSET"]
    import os
    assert os.environ["ANYY_T_SET"] == "from-env" and os.environ["ANYY_T_UNSET"] == "from-file"
    monkeypatch.delenv("ANYY_T_UNSET")


async def test_chat_and_run_pick_up_secrets_env(tmp_path: Path, home: dict[str, str], model, tg) -> None:
    cfg = Path(model_config(tmp_path, model, f'[telegram]\nbase_url = "{tg.base_url}"\ntoken_env = "TG_T"\n'
                                            f'allowed_users = [1001]\n'))
    text = cfg.read_text().replace('model = "fake-1"', 'model = "fake-1"\napi_key_env = "SETUP_T_KEY"')
    cfg.write_text(text)
    save_secrets(cfg.parent / "secrets.env", {"SETUP_T_KEY": "sk-from-file", "TG_T": tg.token})
    code, out, err = await anyy("chat", "--config", str(cfg), env=home, stdin="hello\n")
    assert code == 0 and "echo: hello" in out, err
    assert model.requests[-1].headers["authorization"] == "Bearer sk-from-file"
    code, out, err = await anyy("chat", "--config", str(cfg), env={**home, "SETUP_T_KEY": "sk-env"}, stdin="hi\n")
    assert model.requests[-1].headers["authorization"] == "Bearer sk-env"  # the environment wins
    async with resident(tmp_path, cfg, {}) as proc:
        await tg.wait_calls("getMe")  # `anyy run` polled Telegram with the token from secrets.env
        tg.message("hello from the phone")
        await tg.wait_calls("sendMessage")
        assert await proc.terminate() == 0


async def test_doctor_warns_when_others_may_read_the_config_or_secrets(tmp_path: Path, home: dict[str, str]) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("[runtime]\nmax_tool_rounds = 5\n")
    save_secrets(tmp_path / "secrets.env", {"X_KEY": "1"})
    cfg.chmod(0o600)
    _, out, _ = await anyy("doctor", "--config", str(cfg), env=home)
    assert "readable by other users" not in out
    cfg.chmod(0o644)
    (tmp_path / "secrets.env").chmod(0o640)
    _, out, _ = await anyy("doctor", "--config", str(cfg), env=home)
    assert f"! config: {cfg} is readable by other users of this machine: chmod 600 {cfg}" in out
    assert f"! secrets: {tmp_path / 'secrets.env'} is readable by other users" in out


async def test_a_malformed_secrets_env_is_one_clear_message(tmp_path: Path, home: dict[str, str]) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("")
    (tmp_path / "secrets.env").write_text("OPENAI_API_KEY sk-oops-no-equals\n")
    code, _, err = await anyy("doctor", "--config", str(cfg), env=home)
    assert code == 2 and "secrets.env, line 1: expected NAME=value" in err
    assert "sk-oops" not in err


def test_slack_manifest_is_the_one_the_docs_show() -> None:
    docs = (ROOT / "docs/slack.md").read_text()
    block = re.search(r"paste:\n\n```yaml\n(.*?)```", docs, re.S)
    assert block and block.group(1) == manifest()
    http = manifest("https://anyy.example.com")
    assert "socket_mode_enabled: false" in http and http.count("https://anyy.example.com/slack/events") == 3


def test_systemd_unit_is_the_one_the_docs_show() -> None:
    assert UNIT.format(workdir="%h/anyy", secrets="%h/.config/anyy/secrets.env", anyy="%h/anyy/.venv/bin/anyy",
                       data="%h/.local/share/anyy") == unit_text()
