"""The Slack step: the app manifest to paste at api.slack.com (the one docs/slack.md shows; the package
carries it as slack_manifest.yaml), the tokens checked against Slack (auth.test for the bot token,
apps.connections.open for the app-level one), and Socket Mode unless a public URL is given."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import httpx

from gateway.config import SlackConfig
from gateway.setup.ask import Ask, SetupError, env_value

MEMBER_ID = re.compile(r"[UW][A-Z0-9]{2,}\Z")


def manifest(public_url: str = "") -> str:
    """The app manifest; for HTTP mode (a public URL) Socket Mode off and the request URLs filled in."""
    text = files("gateway.setup").joinpath("slack_manifest.yaml").read_text(encoding="utf-8")
    if not public_url:
        return text
    events = public_url.rstrip("/") + "/slack/events"
    text = text.replace("      should_escape: false\n", f"      should_escape: false\n      url: {events}\n")
    text = text.replace("  event_subscriptions:\n", f"  event_subscriptions:\n    request_url: {events}\n")
    text = text.replace("    is_enabled: true", f"    is_enabled: true\n    request_url: {events}", 1)
    return text.replace("socket_mode_enabled: true", "socket_mode_enabled: false")


@dataclass
class SlackAnswer:
    mode: str  # "socket" or "http"
    owner: str
    base_url: str
    secrets: dict[str, str] = field(default_factory=dict)  # variable -> value
    envs: dict[str, str] = field(default_factory=dict)  # config key -> variable


async def slack_call(base_url: str, method: str, token: str) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(timeout=15) as http:
            r = await http.post(f"{base_url.rstrip('/')}/{method}", headers={"Authorization": f"Bearer {token}"})
            data: dict[str, Any] = r.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise SetupError(f"cannot reach the Slack API: {type(exc).__name__}") from None
    if not data.get("ok"):
        raise SetupError(f"Slack refused the token ({method}): {data.get('error')}")
    return data


async def slack_step(ask: Ask, args: Any, current: SlackConfig | None, secrets: dict[str, str]) -> SlackAnswer:
    base = current or SlackConfig()
    base_url = args.slack_api or base.base_url
    public_url = args.slack_public_url
    if public_url is None and ask.interactive:
        public_url = await ask.text("A public HTTPS address Slack can post events to (Enter for Socket Mode, "
                                    "which needs none)", flag="--slack-public-url", default="") or None
    mode = "http" if public_url else "socket"
    ask.say("Create the app: https://api.slack.com/apps → Create New App → From a manifest, pick the workspace, "
            "paste this, then Install to Workspace:\n")
    ask.say(manifest(public_url or ""))
    answer = SlackAnswer(mode, "", base_url)

    async def token(question: str, key: str, flag: str, given: str | None, prefix: str) -> str:
        env_name = given or getattr(base, key)
        value = await ask.secret(question, flag=flag, env_name=given, current=secrets.get(env_name) or
                                 env_value(env_name))
        if prefix and not value.startswith(prefix):
            raise SetupError(f"that is not a {prefix}… token ({question})")
        answer.secrets[env_name] = value
        answer.envs[key] = env_name
        return value

    bot = await token("Bot User OAuth Token (Install App page, xoxb-…)", "bot_token_env", "--slack-bot-token-env",
                      args.slack_bot_token_env, "xoxb-")
    me = await slack_call(base_url, "auth.test", bot)
    ask.say(f"Slack: this is the bot {me.get('user')} in {me.get('team')}.")
    if mode == "socket":
        app = await token("App-Level Token (Basic Information → App-Level Tokens, scope connections:write, "
                          "xapp-…)", "app_token_env", "--slack-app-token-env", args.slack_app_token_env, "xapp-")
        await slack_call(base_url, "apps.connections.open", app)
        ask.say("Slack: the app-level token opens a Socket Mode connection.")
    else:
        await token("Signing Secret (Basic Information → App Credentials)", "signing_secret_env",
                    "--slack-signing-secret-env", args.slack_signing_secret_env, "")
    owner = await ask.text("Your Slack member ID (your profile → ⋮ → Copy member ID, like U0123ABCD)",
                           flag="--slack-owner", given=args.slack_owner)
    if not MEMBER_ID.match(owner):
        raise SetupError(f"{owner!r} is not a Slack member ID (it looks like U0123ABCD)")
    answer.owner = owner
    return answer


def write_slack(answer: SlackAnswer, current: SlackConfig | None, write: Any) -> None:
    users = list(current.allowed_users) if current else []
    if answer.owner not in users:
        users.append(answer.owner)
    write("allowed_users", users, "who may talk to Anyy: its owners' member IDs")
    write("mode", answer.mode, "socket: Anyy connects out, no public URL; http: Slack posts to you")
    comments = {"bot_token_env": "the variable in secrets.env holding the bot token",
                "app_token_env": "the variable in secrets.env holding the app-level token",
                "signing_secret_env": "the variable in secrets.env holding the signing secret"}
    for key, env_name in answer.envs.items():
        write(key, env_name, comments[key])
    write("base_url", answer.base_url, "the Slack Web API")
