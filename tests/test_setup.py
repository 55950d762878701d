"""`anyy setup --yes …`: the wizard without a terminal, against the fake model, the fake Telegram and the
fake Slack, in a real `anyy` process with its own HOME (so the files land in ~/.config/anyy)."""

from __future__ import annotations

import asyncio
import stat
import tomllib
from pathlib import Path

from tests.fixtures.model import status, tool_call
from tests.support.account_signin import account_toml, forget_devices
from tests.support.cli import ANYY, SUBPROCESS_S, anyy
from tests.support.oauth_provider import MS_CLIENT_ID, MS_USER
from tests.support.slack_events import APP_TOKEN, BOT_TOKEN
from tests.support.telegram_api import OWNER_ID


def files(home: dict[str, str]) -> tuple[Path, Path]:
    folder = Path(home["HOME"]) / ".config" / "anyy"
    return folder / "config.toml", folder / "secrets.env"


def model_flags(model, name: str = "fake-1") -> list[str]:
    return ["--model-provider", "custom", "--model-url", model.url_openai, "--model", name, "--model-key-env", "MY_KEY"]


async def test_model_that_calls_tools_is_saved_with_its_key_in_secrets_env(home, model):
    model.script(tool_call("setup_check", {"ok": True}))
    code, out, err = await anyy("setup", "--yes", *model_flags(model), "--timezone", "Europe/Berlin",
                                env={**home, "MY_KEY": "sk-typed-1234"})
    assert "Model: works, calls tools" in out, out + err
    assert code == 0, out + err
    assert model.requests[0].tool_names == ["setup_check"]
    assert model.requests[0].headers["authorization"] == "Bearer sk-typed-1234"
    config, secrets = files(home)
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600 and stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "MY_KEY=sk-typed-1234" in secrets.read_text()
    text = config.read_text()
    assert "sk-typed-1234" not in text  # the config never holds a secret
    data = tomllib.loads(text)
    # provider "openai" is the default: not written
    assert data["model"] == {"base_url": model.url_openai, "model": "fake-1", "api_key_env": "MY_KEY"}
    assert data["runtime"] == {"timezone": "Europe/Berlin", "welcome": True}
    # short: only what differs from the defaults, each key with its one-line comment
    keys = [line for line in text.splitlines() if "=" in line and not line.startswith("#")]
    assert all(" # " in line for line in keys), keys
    assert len(keys) <= 6, keys
    assert "All good." in out and "✓ model:" in out  # the wizard ends with doctor's verdict


async def test_model_that_does_not_call_tools_is_named_and_not_saved(home, model):
    code, out, _ = await anyy("setup", "--yes", *model_flags(model), env={**home, "MY_KEY": "sk-x-1234"})
    assert "Model: works, but does not call tools — Anyy needs a model that does" in out
    assert code == 1
    config, _ = files(home)
    assert "model" not in tomllib.loads(config.read_text())  # nothing half-working written


async def test_provider_errors_are_said_plainly(home, model):
    cases = [
        (status(401, body={"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}), "bad key: the provider refused the key in $MY_KEY"),
        (status(404, body={"error": {"message": "The model `nope` does not exist or you do not have access to it.",
                                     "type": "invalid_request_error", "code": "model_not_found"}}),
         "unknown model: 'nope' is not a model at"),
        (status(429, body={"error": {"message": "You exceeded your current quota, please check your plan and "
                                                "billing details.", "type": "insufficient_quota",
                                     "code": "insufficient_quota"}}), "no credit: the account behind this key"),
        # DeepSeek's "402 - Insufficient Balance" and Gemini's bad key, a 400 whose body is a list
        (status(402, body={"error": {"message": "Insufficient Balance", "type": "unknown_error"}}),
         "no credit: the account behind this key"),
        (status(400, body=[{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                      "status": "INVALID_ARGUMENT"}}]), "bad key: the provider refused the key"),
    ]
    for step, said in cases:
        model.script(step)
        code, out, _ = await anyy("setup", "model", "--yes", *model_flags(model, "nope"),
                                  env={**home, "MY_KEY": "sk-bad-1234"})
        assert code == 1 and f"Model: {said}" in out, out
        assert "sk-bad-1234" not in out


async def test_a_missing_answer_names_its_flag(home):
    code, out, _ = await anyy("setup", "model", "--yes", env=home)
    assert code == 1 and "give --model-provider" in out, out
    code, out, _ = await anyy("setup", "model", "--yes", "--model-provider", "openai", env=home)
    assert code == 1 and "give --model-key-env NAME" in out, out


async def test_telegram_owner_is_whoever_sends_start_and_is_answered_there(home, model, tg):
    proc = await asyncio.create_subprocess_exec(
        *ANYY, "setup", "telegram", "--yes", "--telegram-token-env", "BOT", "--telegram-api", tg.base_url,
        env={**home, "BOT": tg.token}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await tg.wait_calls("getUpdates", timeout=SUBPROCESS_S)  # the wizard is waiting for /start
    tg.message("/start", user_id=OWNER_ID, user_name="alice")
    out, err = await asyncio.wait_for(proc.communicate(), SUBPROCESS_S)
    text = out.decode()
    assert f"Telegram: this is @{tg.username}." in text, text + err.decode()
    assert f"send /start to @{tg.username}" in text
    sent = await tg.wait_calls("sendMessage")
    assert int(sent[0].params["chat_id"]) == OWNER_ID and "You are my owner now" in sent[0].params["text"]
    assert tg.pending == []  # the /start is consumed: `anyy run` will not answer it again
    config, secrets = files(home)
    tele = tomllib.loads(config.read_text())["telegram"]
    assert tele["allowed_users"] == [OWNER_ID] and tele["token_env"] == "BOT" and tele["base_url"] == tg.base_url
    assert f"BOT={tg.token}" in secrets.read_text()
    assert f"✓ telegram: bot @{tg.username}" in text  # doctor, with the token from secrets.env
    assert proc.returncode == 1  # doctor: no model configured in this run


async def test_telegram_refused_token_and_no_start(home, tg):
    code, out, _ = await anyy("setup", "telegram", "--yes", "--telegram-token-env", "BOT", "--telegram-api",
                              tg.base_url, env={**home, "BOT": "123:wrong"})
    assert code == 1 and "✗ telegram: Telegram refused getMe: Unauthorized" in out, out
    assert "123:wrong" not in out
    code, out, _ = await anyy("setup", "telegram", "--yes", "--telegram-token-env", "BOT", "--telegram-api",
                              tg.base_url, "--telegram-wait-s", "1", env={**home, "BOT": tg.token})
    assert code == 1 and "no /start arrived within 1 s" in out, out
    assert not files(home)[0].exists() or "telegram" not in files(home)[0].read_text()


async def test_slack_tokens_checked_socket_mode_and_manifest_printed(home, slack_fake):
    env = {**home, "SB": BOT_TOKEN, "SA": APP_TOKEN}
    code, out, err = await anyy("setup", "slack", "--yes", "--slack-bot-token-env", "SB", "--slack-app-token-env", "SA",
                                "--slack-owner", "U0123ABCD", "--slack-api", slack_fake.base_url, env=env)
    assert "Slack: this is the bot anyy in Fake." in out, out + err
    assert "socket_mode_enabled: true" in out and "- message.im" in out  # the manifest to paste
    methods = [c.method for c in slack_fake.calls.items()]
    assert "auth.test" in methods and "apps.connections.open" in methods
    data = tomllib.loads(files(home)[0].read_text())["slack"]
    assert data["allowed_users"] == ["U0123ABCD"] and data["bot_token_env"] == "SB" and data["app_token_env"] == "SA"
    assert "mode" not in data  # socket is the default: not written
    assert "✓ slack: bot anyy in Fake (socket mode)" in out
    slack_fake.fail("auth.test", "invalid_auth")  # a revoked token
    code, out, _ = await anyy("setup", "slack", "--yes", "--slack-bot-token-env", "SB", "--slack-owner", "U0123ABCD",
                              "--slack-api", slack_fake.base_url, env={**home, "SB": "xoxb-revoked"})
    assert code == 1 and "Slack refused the token (auth.test): invalid_auth" in out


async def test_slack_with_a_public_url_is_http_mode(home, slack_fake):
    env = {**home, "SB": BOT_TOKEN, "SS": "signing-secret-1"}
    await anyy("setup", "slack", "--yes", "--slack-bot-token-env", "SB", "--slack-signing-secret-env", "SS",
               "--slack-public-url", "https://anyy.example.com", "--slack-owner", "U0123ABCD",
               "--slack-api", slack_fake.base_url, env=env)
    data = tomllib.loads(files(home)[0].read_text())["slack"]
    assert data["mode"] == "http" and data["signing_secret_env"] == "SS"


async def test_rerun_keeps_the_owners_comment_and_key(home, model):
    config, _ = files(home)
    config.parent.mkdir(parents=True)
    config.write_text('# my notes about this assistant\n[runtime]\nmax_tool_rounds = 7  # I like it short\n'
                      'timezone = "UTC"  # where I live\n\n[web]\nsearch = "none"\n')
    code, out, _ = await anyy("setup", "zone", "--yes", "--timezone", "Asia/Tokyo", env=home)
    assert code in (0, 1), out
    text = config.read_text()
    assert text.startswith("# my notes about this assistant\n[runtime]\nmax_tool_rounds = 7  # I like it short\n"
                           'timezone = "Asia/Tokyo"  # where I live\n'), text
    assert '[web]\nsearch = "none"' in text
    model.script(tool_call("setup_check", {"ok": True}))
    await anyy("setup", "model", "--yes", *model_flags(model), env={**home, "MY_KEY": "sk-1234"})
    data = tomllib.loads(config.read_text())
    assert data["runtime"]["max_tool_rounds"] == 7 and data["model"]["model"] == "fake-1"
    assert "# I like it short" in config.read_text()


async def test_an_invalid_config_is_not_overwritten(home):
    config, _ = files(home)
    config.parent.mkdir(parents=True)
    config.write_text("[model\nbroken")
    code, out, _ = await anyy("setup", "zone", "--yes", "--timezone", "Asia/Tokyo", env=home)
    assert code == 2 and "✗ zone:" in out and "not valid TOML" in out, out  # doctor cannot read it either
    assert config.read_text() == "[model\nbroken"


async def test_accounts_step_writes_the_table_and_hands_off_to_accounts_add(home, oauth, fake_ca):
    config, _ = files(home)
    config.parent.mkdir(parents=True)
    # The fake provider's endpoints stand where Microsoft's defaults would: a re-run keeps them.
    config.write_text(account_toml("work", "microsoft", oauth.base_url, client_id="an-old-client"))
    forget_devices(oauth)
    proc = await asyncio.create_subprocess_exec(
        *ANYY, "setup", "accounts", "--yes", "--account", "work", "--account-provider", "microsoft",
        "--account-client-id", MS_CLIENT_ID, env=home | fake_ca.environ(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    user_code = await asyncio.to_thread(oauth.wait_device, SUBPROCESS_S)  # `anyy accounts add work` is signing in
    oauth.approve_device(user_code)
    out, err = await asyncio.wait_for(proc.communicate(), SUBPROCESS_S)
    text = out.decode()
    assert "Signing in to 'work' (anyy accounts add work)" in text and f"Signed in to 'work' as {MS_USER}" in text, \
        text + err.decode()
    assert tomllib.loads(config.read_text())["accounts"]["work"]["client_id"] == MS_CLIENT_ID
    assert "✓ account: work" in text  # doctor sees it connected


async def test_a_local_ollama_is_found_and_its_models_listed(home, model):
    from aiohttp import web

    async def tags(request: web.Request) -> web.Response:
        return web.json_response({"models": [{"name": "qwen2.5:7b"}, {"name": "llama3.1:8b"}]})

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({}, status=500)

    app = web.Application()
    app.router.add_get("/api/tags", tags)
    app.router.add_post("/v1/chat/completions", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        code, out, _ = await anyy("setup", "model", "--yes", "--model-provider", "ollama", "--model-url", base,
                                  env=home)
    finally:
        await runner.cleanup()
    assert "Pulled in Ollama: qwen2.5:7b, llama3.1:8b" in out and f"Testing qwen2.5:7b at {base}/v1" in out, out
    assert code == 1  # this "Ollama" answers 500: the first pulled model is the default, and the error is shown


async def test_service_step_installs_the_unit_with_this_installations_paths(home):
    _, out, _ = await anyy("setup", "service", "--yes", "--service", "--no-start", env=home)
    unit = Path(home["HOME"]) / ".config/systemd/user/anyy.service"
    text = unit.read_text()
    assert f"EnvironmentFile={Path(home['HOME'])}/.config/anyy/secrets.env" in text
    assert f"ReadWritePaths={home['ANYY_HOME']}" in text and " run\n" in text.split("ExecStart=")[1][:400]
    assert "start it with `systemctl --user enable --now anyy`" in out
    assert Path(home["ANYY_HOME"]).is_dir()  # ReadWritePaths= must exist before the first start
