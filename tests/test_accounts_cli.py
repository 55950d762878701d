"""`anyy accounts add|list|remove` as the owner runs them: the real command in a subprocess, signing in to
the fake Google and Microsoft authorization servers over TLS (the CA handed over by SSL_CERT_FILE and
REQUESTS_CA_BUNDLE), the test playing the browser. `anyy accounts test` is in tests/test_accounts_e2e.py,
with the mail and calendar fakes."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.account_signin import (
    SECRET_ENV,
    account_toml,
    consent,
    forget_devices,
    land,
    link_in,
    secret_env,
)
from tests.support.cli import ANYY, SUBPROCESS_S, anyy, write_config
from tests.support.oauth_provider import GOOGLE_CALENDAR, GOOGLE_USER, MS_USER, OAuthFake
from tests.support.tls_ca import FakeCA


class Running:
    """`anyy ARGS` running: its stdout read line by line as it prints, stdin open for a paste."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out: list[str] = []

    @classmethod
    async def start(cls, *args: str, env: dict[str, str]) -> Running:
        proc = await asyncio.create_subprocess_exec(*ANYY, *args, env=env, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        return cls(proc)

    async def link(self) -> str:
        """The authorization link, once printed."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(SUBPROCESS_S):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                assert line, f"ended before printing a link: {''.join(self.out)}"
                self.out.append(line)
                if found := link_in(line):
                    return found

    async def paste(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        await self.proc.stdin.drain()

    async def finish(self) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), SUBPROCESS_S)
        return self.proc.returncode or 0, "".join(self.out) + out.decode(), err.decode()


@pytest.fixture
def env(oauth: OAuthFake, fake_ca: FakeCA, home: dict[str, str]) -> dict[str, str]:
    forget_devices(oauth)
    return home | fake_ca.environ() | secret_env()


def config(tmp_path: Path, oauth: OAuthFake) -> str:
    return write_config(tmp_path, account_toml("personal", "google", oauth.base_url)
                        + account_toml("work", "microsoft", oauth.base_url))


async def states(cfg: str, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    code, out, err = await anyy("accounts", "list", "--json", "--config", cfg, env=env)
    assert code == 0, err
    return {s["name"]: s for s in json.loads(out)}


async def test_google_in_the_browser_then_list_and_remove(tmp_path: Path, oauth: OAuthFake,
                                                          env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    earlier = set(oauth.refresh_tokens)  # the session's fake holds other tests' grants too
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    page = await land(await consent(await run.link()))
    assert page.status_code == 200
    code, out, err = await run.finish()
    assert code == 0, err
    assert f"as {GOOGLE_USER}" in out and "anyy accounts test personal" in out
    listed = await states(cfg, env)
    assert listed["personal"]["state"] == "connected" and listed["personal"]["address"] == GOOGLE_USER
    assert listed["work"]["state"] == "sign-in needed"
    code, out, _ = await anyy("accounts", "list", "--config", cfg, env=env)
    assert code == 0 and GOOGLE_USER in out and "anyy accounts add work" in out
    assert "ya29." not in out + json.dumps(listed)  # no access token shown anywhere

    (ours,) = set(oauth.refresh_tokens) - earlier
    assert not oauth.refresh_tokens[ours].revoked
    code, out, err = await anyy("accounts", "remove", "personal", "--config", cfg, env=env)
    assert code == 0, err
    assert "Revoked" in out
    assert oauth.refresh_tokens[ours].revoked
    assert (await states(cfg, env))["personal"]["state"] == "sign-in needed"


async def test_google_by_pasting_the_address_the_browser_ended_on(tmp_path: Path, oauth: OAuthFake,
                                                                  env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    await run.paste(await consent(await run.link()))
    code, _, err = await run.finish()
    assert code == 0, err
    assert (await states(cfg, env))["personal"]["address"] == GOOGLE_USER


async def test_a_pasted_address_with_another_state_is_refused_and_nothing_saved(
        tmp_path: Path, oauth: OAuthFake, env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    address = await consent(await run.link())
    await run.paste(address.replace("state=", "state=x"))
    code, _, err = await run.finish()
    assert code == 1 and "state" in err and "Nothing was saved" in err
    assert "Traceback" not in err
    assert oauth.calls["google.token.authorization_code"] == 0
    assert (await states(cfg, env))["personal"]["state"] == "sign-in needed"


async def test_microsoft_device_code(tmp_path: Path, oauth: OAuthFake, env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "work", "--config", cfg, env=env)
    user_code = await asyncio.to_thread(oauth.wait_device, SUBPROCESS_S)
    oauth.approve_device(user_code)
    code, out, err = await run.finish()
    assert code == 0, err
    assert user_code in out and f"as {MS_USER}" in out
    assert (await states(cfg, env))["work"]["state"] == "connected"
    code, out, err = await anyy("accounts", "remove", "work", "--config", cfg, env=env)
    assert code == 0 and "Deleted the tokens" in out and "no way for Anyy to revoke" in out, err
    assert "https://myapps.microsoft.com" in out
    assert (await states(cfg, env))["work"]["state"] == "sign-in needed"


async def test_an_expired_device_code_says_so_and_saves_nothing(tmp_path: Path, oauth: OAuthFake,
                                                               env: dict[str, str]) -> None:
    oauth.device_lifetime = 2
    cfg = config(tmp_path, oauth)
    code, _, err = await anyy("accounts", "add", "work", "--config", cfg, env=env)
    assert code == 1 and "expired before it was approved" in err and "Nothing was saved" in err
    assert (await states(cfg, env))["work"]["state"] == "sign-in needed"


async def test_microsoft_paste_for_tenants_that_block_device_code(tmp_path: Path, oauth: OAuthFake,
                                                                  env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "work", "--paste", "--config", cfg, env=env)
    await run.paste(await consent(await run.link()))
    code, _, err = await run.finish()
    assert code == 0, err
    assert oauth.calls["microsoft.token.device_code"] == 0
    assert (await states(cfg, env))["work"]["address"] == MS_USER


async def test_ctrl_c_while_waiting_leaves_nothing_half_saved(tmp_path: Path, oauth: OAuthFake,
                                                              env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "work", "--config", cfg, env=env)
    await asyncio.to_thread(oauth.wait_device, SUBPROCESS_S)
    async with asyncio.timeout(SUBPROCESS_S):  # msal's thread is polling: `authorization_pending` answered
        while oauth.calls["microsoft.token.device_code"] == 0:
            await asyncio.sleep(0.05)
    run.proc.send_signal(signal.SIGINT)
    code, _, err = await run.finish()  # msal's polling thread is told to stop: the process ends promptly
    assert code == 130 and "Traceback" not in err, err
    assert (await states(cfg, env))["work"]["state"] == "sign-in needed"


async def test_ctrl_c_while_waiting_for_the_browser_leaves_nothing(tmp_path: Path, oauth: OAuthFake,
                                                                   env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    await run.link()  # listening, and reading stdin for a paste
    run.proc.send_signal(signal.SIGINT)
    code, _, err = await run.finish()
    assert code == 130 and "Traceback" not in err, err
    assert (await states(cfg, env))["personal"]["state"] == "sign-in needed"


async def test_unticked_permissions_are_named_and_listed_as_missing(tmp_path: Path, oauth: OAuthFake,
                                                                    env: dict[str, str]) -> None:
    oauth.withhold = {GOOGLE_CALENDAR}  # the owner unticked Calendar on Google's consent page
    cfg = config(tmp_path, oauth)
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    await land(await consent(await run.link()))
    code, out, _ = await run.finish()
    assert code == 1 and f"Not granted: {GOOGLE_CALENDAR}" in out
    listed = (await states(cfg, env))["personal"]
    assert listed["state"] == "missing scopes" and listed["missing"] == [GOOGLE_CALENDAR]


async def test_before_signing_in_test_and_remove_say_what_to_do(tmp_path: Path, oauth: OAuthFake,
                                                                env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    code, out, _ = await anyy("accounts", "test", "work", "--config", cfg, env=env)
    assert code == 1 and out.count("FAILED") == 3 and "`anyy accounts add work`" in out
    code, out, _ = await anyy("accounts", "remove", "work", "--config", cfg, env=env)
    assert code == 0 and "nothing to remove" in out


async def test_an_account_not_in_the_config_is_a_clear_error(tmp_path: Path, oauth: OAuthFake,
                                                            env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    code, _, err = await anyy("accounts", "add", "nosuch", "--config", cfg, env=env)
    assert code == 1 and "no account 'nosuch'" in err and "personal, work" in err


async def test_a_missing_client_secret_is_named_before_anything_starts(tmp_path: Path, oauth: OAuthFake,
                                                                      env: dict[str, str]) -> None:
    cfg = config(tmp_path, oauth)
    without = {k: v for k, v in env.items() if k not in secret_env()}
    code, out, err = await anyy("accounts", "add", "personal", "--config", cfg, env=without)
    assert code == 1 and f"{SECRET_ENV} is not set" in err and "https://" not in out
    assert oauth.calls["google.authorize"] == 0
