"""`anyy setup` as a new user meets it: at a real terminal (a pty), from an empty HOME to a conversation on
(fake) Telegram, without a docs page or a file edited by hand."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.model import tool_call
from tests.support.cli import ANYY, SUBPROCESS_S
from tests.support.resident import Resident
from tests.support.telegram_api import OWNER_ID
from tests.support.terminal import Terminal

TTY = {"TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "120", "LINES": "40"}


async def on_a_pty(*argv: str, env: dict[str, str]) -> Terminal:
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(*ANYY, *argv, env={**env, **TTY}, stdin=slave, stdout=slave,
                                                   stderr=slave)
    os.close(slave)
    return Terminal(master, process)


async def finish(term: Terminal, timeout: float = SUBPROCESS_S) -> int:
    """The exit code, once the process ends (killed after `timeout`: pass 0 when the test already failed)."""
    try:
        return await asyncio.wait_for(term.process.wait(), timeout)
    except TimeoutError:
        return -1
    finally:
        if term.process.returncode is None:
            term.process.kill()
            await term.process.wait()
        os.close(term.master)


@pytest.mark.timeout(400)  # two `anyy` processes, each may take a while to start on a loaded machine
async def test_from_nothing_to_a_telegram_conversation(home, model, tg):
    model.script(tool_call("setup_check", {"ok": True}))
    term = await on_a_pty("setup", "--telegram-api", tg.base_url, env=home)
    try:
        await term.expect(r"Set up the language model\? \[Y/n\]")
        term.type("\r")
        await term.expect(r"5\. any OpenAI-compatible server.*Choose a number \[1\]:")
        term.type("5\r")
        await term.expect(r"Its base URL")
        term.type(model.url_openai + "\r")
        await term.expect(r"Which model")
        term.type("fake-1\r")
        await term.expect(r"Does this server need an API key\? \[y/N\]")
        term.type("y\r")
        await term.expect(r"API key \(kept in secrets.env as ANYY_MODEL_API_KEY\), typed without echo:")
        term.type("sk-typed-secret-42\r")
        await term.expect(r"Model: works, calls tools")
        await term.expect(r"Set up Telegram\? \[Y/n\]")
        term.type("\r")
        await term.expect(r"@BotFather.*The bot's token, typed without echo:")
        term.type(tg.token + "\r")
        await term.expect(rf"Now send /start to @{tg.username}")
        tg.message("/start", user_id=OWNER_ID, user_name="alice")
        await term.expect(rf"id {OWNER_ID}, sent /start\. Make them the owner\? \[Y/n\]")
        term.type("\r")
        await term.expect(r"Set up Slack\? \[y/N\]")
        term.type("\r")
        await term.expect(r"Set up the time zone\? \[Y/n\]")
        term.type("\r")
        await term.expect(r"Time zone detected: UTC.*Your time zone.*\[UTC\]:")
        term.type("Europe/Paris\r")
        await term.expect(r"Set up a Google or Microsoft account.*\[y/N\]")
        term.type("n\r")
        await term.expect(r"systemd user service.*\[y/N\]")
        term.type("\r")
        out = await term.expect(r"All good\.")
    except BaseException:
        await finish(term, 0)
        raise
    code = await finish(term)
    assert code == 0, out
    assert "sk-typed-secret-42" not in out and tg.token not in out  # typed without echo
    assert "✓ telegram: bot @" in out and "✓ model: openai fake-1" in out
    config = Path(home["HOME"]) / ".config/anyy/config.toml"
    data = tomllib.loads(config.read_text())
    assert data["telegram"]["allowed_users"] == [OWNER_ID]
    assert "ANYY_MODEL_API_KEY=sk-typed-secret-42" in (config.parent / "secrets.env").read_text()

    # The owner now talks to Anyy on the phone: `anyy run` with nothing but what setup wrote.
    with (Path(home["HOME"]) / "run.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(*ANYY, "run", env=home, stdin=asyncio.subprocess.DEVNULL,
                                                       stdout=log, stderr=log)
        resident = Resident(process, Path(home["HOME"]) / "run.log")
        try:
            tg.message("hello from the phone")
            sent = await tg.wait_calls("sendMessage", 3, timeout=SUBPROCESS_S)  # setup's hello, welcome, answer
            assert sent[1].params["text"].startswith("Welcome!")
            assert sent[2].params["text"] == "echo: hello from the phone"
            assert model.requests[-1].headers["authorization"] == "Bearer sk-typed-secret-42"
            assert await resident.terminate() == 0, resident.output()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_a_step_alone_and_ctrl_c_skips_it(home, model):
    term = await on_a_pty("setup", "zone", env=home)
    try:
        await term.expect(r"Your time zone.*:")
        term.type("Mars/Olympus\r")
        await term.expect(r"'Mars/Olympus' is not a time zone name.*Your time zone \[")
        term.type("\x03")  # Ctrl-C: this step is skipped, setup goes on to doctor
        out = await term.expect(r"Nothing was written")
    except BaseException:
        await finish(term, 0)
        raise
    code = await finish(term)
    assert "(skipped zone)" in out and code == 1, out
    assert not (Path(home["HOME"]) / ".config/anyy/config.toml").exists()


async def test_ctrl_c_while_waiting_for_start_skips_telegram(home, tg):
    term = await on_a_pty("setup", "telegram", "--telegram-api", tg.base_url, env=home)
    try:
        await term.expect(r"The bot's token, typed without echo:")
        term.type(tg.token + "\r")
        await term.expect(r"Now send /start to .*Waiting…")
        await tg.wait_calls("getUpdates")
        # Ctrl-C away from a prompt: the terminal's SIGINT (sent here by hand: the pty is not the child's
        # controlling terminal), which skips the step being waited on
        term.process.send_signal(signal.SIGINT)
        out = await term.expect(r"Nothing was written")
    except BaseException:
        await finish(term, 0)
        raise
    assert "(skipped telegram)" in out and "Traceback" not in out, out
    assert await finish(term) == 1


async def test_an_account_named_with_a_dash_keeps_its_secret_in_a_valid_variable(home):
    term = await on_a_pty("setup", "accounts", env=home)
    try:
        await term.expect(r"A name for the account.*:")
        term.type("my-work\r")
        await term.expect(r"Which provider\?.*:")
        term.type("google\r")
        await term.expect(r"The OAuth client ID:")
        term.type("1234-anyytest.apps.googleusercontent.com\r")
        await term.expect(r"The OAuth client secret.*typed without echo:")
        term.type("GOCSPX-typed-secret\r")
        await term.expect(r"Open this link in a browser")  # saved: `anyy accounts add my-work` signs in
        term.process.send_signal(signal.SIGINT)
        await term.expect(r"skipped accounts")
    except BaseException:
        await finish(term, 0)
        raise
    await finish(term)
    secrets = (Path(home["HOME"]) / ".config/anyy/secrets.env").read_text()
    assert "ANYY_MY_WORK_CLIENT_SECRET=GOCSPX-typed-secret" in secrets, secrets
    config = tomllib.loads((Path(home["HOME"]) / ".config/anyy/config.toml").read_text())
    assert config["accounts"]["my-work"]["client_secret_env"] == "ANYY_MY_WORK_CLIENT_SECRET"
    # Every later command reads secrets.env without tripping on it.
    listed = await asyncio.create_subprocess_exec(*ANYY, "accounts", "list", env=home, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(listed.communicate(), SUBPROCESS_S)
    assert listed.returncode == 0 and "my-work" in out.decode(), out.decode()
