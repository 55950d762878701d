"""`anyy doctor`: what is wrong with this installation and how to fix it, one line per check."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gateway.cli.mcp import doctor_checks

# The checks import what they check when they run: building the CLI's parser loads none of it, and a
# check of an unconfigured feature loads nothing.
if TYPE_CHECKING:
    from gateway.config import Config

OK, BAD, WARN = "✓", "✗", "!"


async def doctor(config: Config, args: argparse.Namespace) -> int:
    from gateway.redaction import configured_secrets, redact
    from gateway.services.factory import computer_use_check, connector_checks
    from gateway.surfaces import build_surfaces
    results: list[tuple[str, str, str]] = [(OK, "config", config.source), *file_modes(config), _zone(config)]
    results.append(await _store(config))
    if config.approvals.hook:
        problem = hook_problem(config)
        results.append((BAD, "approvals", problem) if problem else
                       (OK, "approvals", f"hook {config.approvals.hook} loads"))
    results.append(await _model(config))
    surfaces, problems = build_surfaces(config)
    results += [(BAD, "surface", p) for p in problems]
    for surface in surfaces:
        results.append(await _surface(config, surface.name))
    if not surfaces and not problems:
        results.append((WARN, "surfaces", "none configured: only `anyy chat` (the terminal) can reach you"))
    results += await connector_checks(config)
    results += await _accounts(config)
    results.append(toolsets_line(config))
    results += await computer_use_check(config.computer_use)
    results += await doctor_checks(config)
    secrets = configured_secrets(config)
    results += _media(config)
    for mark, what, detail in results:
        print(redact(f"{mark} {what}: {detail}", secrets))
    failed = sum(1 for mark, _, _ in results if mark == BAD)
    print("All good." if not failed else f"{failed} problem(s) to fix.")
    return 1 if failed else 0


def preflight(config: Config) -> list[str]:
    """What would stop `anyy run` or `anyy chat` from starting, each naming its config key; checked
    before they start so the owner reads one line, not a traceback."""
    return [p for p in (hook_problem(config), store_dir_problem(config)) if p]


def hook_problem(config: Config) -> str | None:
    """Why `[approvals] hook` cannot be used, or None."""
    from gateway.approvals.policy import PolicyHookError, load_hook
    try:
        load_hook(config.approvals.hook)
    except PolicyHookError as exc:
        return f"{exc} (in {config.source}: an importable module:function, or remove the key)"
    return None


def store_dir_problem(config: Config) -> str | None:
    """Why the store's directory cannot be created, or None."""
    parent = config.store_path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return (f"[store] path: cannot create {parent}: {exc.strerror} "
                f"(set [store] path in {config.source} to a writable place, or $ANYY_HOME)")
    return None


def file_modes(config: Config) -> list[tuple[str, str, str]]:
    """A warning for the config file and secrets.env beside it when others on this machine may read them."""
    from pathlib import Path

    from gateway.config.secrets_file import readable_by_others, secrets_path
    source = Path(config.source)
    return [(WARN, what, f"{path} is readable by other users of this machine: chmod 600 {path}")
            for what, path in (("config", source), ("secrets", secrets_path(source))) if readable_by_others(path)]


def _zone(config: Config) -> tuple[str, str, str]:
    """The zone reminders and times use, and where it came from."""
    if config.tz_source.endswith("(fallback)"):
        return WARN, "time zone", "UTC: no system zone found; set [runtime] timezone, e.g. \"Europe/Berlin\""
    return OK, "time zone", f"{config.tz.key}, from {config.tz_source}"


async def _store(config: Config) -> tuple[str, str, str]:
    from store.db import StoreError
    from store.records import iso
    if problem := store_dir_problem(config):
        return BAD, "store", problem
    store = config.new_store()
    try:
        async with store:
            holders = await store.run(lambda db: db.execute(
                "SELECT name, owner FROM leases WHERE lease_until > ? ORDER BY name", [iso(store.now())]).fetchall())
    except StoreError as exc:
        hint = ("check that the server is up, the URL and [store] password_env" if config.store.url
                else f"check that {config.store_path.parent} is writable, or set [store] path")
        return BAD, "store", f"{exc} ({hint})"
    polls = [f"{name.removeprefix('poll:')} polled by {owner}" for name, owner in holders if name.startswith("poll:")]
    lanes = sum(1 for name, _ in holders if name.startswith("lane:"))
    detail = f"{store.dialect} {store.where}: reachable, migrated"
    if config.store.url:
        detail += "; " + ", ".join([*polls, f"{lanes} conversation(s) in a turn"])
    return OK, "store", detail


async def _accounts(config: Config) -> list[tuple[str, str, str]]:
    """Each OAuth account's state from the store (no token is read, no provider called), and whether
    this process's key opens the stored tokens."""
    if not config.accounts:
        return []
    from gateway.accounts import account_tokens
    from store.db import StoreError
    secrets = client_secret_lines(config)
    try:
        async with config.new_store() as store:
            accounts = account_tokens(config, store)
            states = await accounts.states()
            key_problem = await accounts.key_problem()
    except StoreError:
        return secrets  # the store line says why the states are missing
    marks = {"connected": OK, "missing scopes": WARN}
    lines = [(marks.get(s.state, BAD), "account", s.summary) for s in states]
    if key_problem:
        lines.append((BAD, "accounts", key_problem))
    return lines + secrets


def client_secret_lines(config: Config) -> list[tuple[str, str, str]]:
    """A problem for each account whose `client_secret_env` is unset (its tokens cannot be refreshed: mail
    and calendar stop within the hour), and a warning for one set only in this shell, since the service
    reads nothing but secrets.env."""
    from pathlib import Path

    from gateway.config.secrets_file import SecretsError, read_secrets, secrets_path
    path = secrets_path(Path(config.source))
    try:
        in_file = read_secrets(path)
    except SecretsError:
        in_file = {}  # unreadable: every command has said so already
    lines: list[tuple[str, str, str]] = []
    for name, cfg in config.accounts.items():
        env = cfg.client_secret_env
        if not env:
            continue
        if cfg.client_secret() is None:
            lines.append((BAD, "account", f"{name}: {env} is not set, so its access tokens cannot be refreshed: "
                                          f"put {env}=<the OAuth client secret> in {path}, then restart Anyy"))
        elif env not in in_file:
            lines.append((WARN, "account", f"{name}: {env} is set in this shell but not in {path}; the service "
                                           "reads only that file: put it there"))
    return lines


async def _model(config: Config) -> tuple[str, str, str]:
    cfg = config.model
    if not cfg.configured:
        return BAD, "model", (f"not configured: set [model] base_url and model in {config.source} "
                              "(e.g. base_url = \"http://127.0.0.1:11434/v1\" for a local Ollama)")
    from gateway.config import secret
    from gateway.llm import make_client
    from gateway.llm.types import ChatMessage, ModelUnavailable
    key = secret(cfg.api_key_env)
    client = make_client(cfg.model_copy(update={"max_retries": 0, "timeout_s": min(cfg.timeout_s, 15)}), key)
    try:
        reply = await client.complete([ChatMessage(role="user", content="Reply with the word: ok")], [])
    except ModelUnavailable as exc:
        hint = "" if key else f" (${cfg.api_key_env} is not set; fine for a local server that needs no key)"
        return BAD, "model", f"{exc}{hint}"
    finally:
        await client.aclose()
    return OK, "model", f"{cfg.provider} {reply.model or cfg.model} at {cfg.base_url} answers"


def toolsets_line(config: Config) -> tuple[str, str, str]:
    """Which toolsets the model can have with this config: the runtime's answer (one function decides)."""
    from gateway.services.availability import availability
    from toolsets.registry import TOOLSETS
    avail = availability(config)
    here = [ts.name for ts in TOOLSETS if ts.present(avail) is not None]
    absent = [ts.name for ts in TOOLSETS if ts.name not in here]
    return OK, "toolsets", (f"{len(here)} of {len(TOOLSETS)} available: {', '.join(here)}"
                            + (f"; not configured: {', '.join(absent)} (`anyy tools` says why)" if absent else ""))


def _media(config: Config) -> list[tuple[str, str, str]]:
    """Voice notes in (a transcription endpoint) and out (a usable speech engine); see docs/media.md."""
    from gateway.services.availability import tts_problem
    speech, tts = config.speech, config.tts
    lines = [(OK, "speech", f"voice notes are transcribed at {speech.transcribe_url} ({speech.transcribe_model})")
             if speech.transcribe_url else
             (WARN, "speech", "voice notes are not transcribed: set [speech] transcribe_url (docs/media.md)")]
    if tts.engine != "none":
        problem = tts_problem(config)
        lines.append((BAD, "tts", problem) if problem else
                     (OK, "tts", f"text_to_speech with {tts.engine} (voice {tts.voice})"))
    return lines


async def _surface(config: Config, name: str) -> tuple[str, str, str]:
    """A read-only identity call with the configured token: getMe / auth.test."""
    import httpx

    from gateway.config import secret
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            if name == "telegram" and config.telegram is not None:
                token = secret(config.telegram.token_env) or ""
                r = await http.get(f"{config.telegram.base_url}{token}/getMe")
                data = r.json()
                if not data.get("ok"):
                    return (BAD, "telegram",
                            f"the token in ${config.telegram.token_env} was refused: {data.get('description')}")
                return OK, "telegram", f"bot @{data['result'].get('username')} ({config.telegram.mode})"
            if name == "slack" and config.slack is not None:
                token = secret(config.slack.bot_token_env) or ""
                r = await http.post(f"{config.slack.base_url.rstrip('/')}/auth.test",
                                    headers={"Authorization": f"Bearer {token}"})
                data = r.json()
                if not data.get("ok"):
                    return BAD, "slack", f"the token in ${config.slack.bot_token_env} was refused: {data.get('error')}"
                return OK, "slack", f"bot {data.get('user')} in {data.get('team')} ({config.slack.mode} mode)"
    except (httpx.HTTPError, ValueError) as exc:
        # The exception text can contain the request URL, and a Telegram URL contains the token.
        return BAD, name, f"cannot reach the {name} API: {type(exc).__name__}"
    return WARN, name, "not checked"
