"""`anyy setup [STEP]`: the wizard (gateway/setup/), then `anyy doctor`'s verdict on what it wrote.

Every question has a flag, so `anyy setup --yes --model-provider openai --model gpt-5-mini --model-key-env
OPENAI_API_KEY …` runs without a terminal; a flag that names a variable (`--*-env`) reads the secret from
the environment and keeps it in secrets.env.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import Config

STEPS = ("model", "telegram", "slack", "zone", "accounts", "service")  # gateway.setup.wizard.STEPS


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("setup", parents=[common], help="the setup wizard: model, Telegram, Slack, time zone, "
                                                       "accounts, service (each skippable; `anyy setup STEP` alone)")
    p.add_argument("step", nargs="?", choices=STEPS, help="run only this step")
    p.add_argument("--yes", action="store_true", help="ask nothing: take each answer from its flag, else the default")
    p.add_argument("--skip", action="append", choices=STEPS, metavar="STEP", help="leave this step out (repeatable)")
    m = p.add_argument_group("model")
    m.add_argument("--model-provider", choices=("openai", "anthropic", "openrouter", "ollama", "custom"))
    m.add_argument("--model", help="the model's name, e.g. gpt-5-mini")
    m.add_argument("--model-url", help="an OpenAI-compatible server's base URL (custom), or Ollama's address")
    m.add_argument("--model-key-env", metavar="VAR", help="the variable holding the API key")
    t = p.add_argument_group("telegram")
    t.add_argument("--telegram-token-env", metavar="VAR", help="the variable holding the bot token")
    t.add_argument("--telegram-owner", type=int, metavar="ID", help="the owner's user id (else: wait for /start)")
    t.add_argument("--telegram-wait-s", type=float, default=300, metavar="S", help="how long to wait for /start")
    t.add_argument("--telegram-api", metavar="URL", help="a Bot API server (default https://api.telegram.org/bot)")
    s = p.add_argument_group("slack")
    s.add_argument("--slack-bot-token-env", metavar="VAR", help="the variable holding the xoxb- bot token")
    s.add_argument("--slack-app-token-env", metavar="VAR", help="the variable holding the xapp- app-level token")
    s.add_argument("--slack-signing-secret-env", metavar="VAR", help="HTTP mode: the variable holding the secret")
    s.add_argument("--slack-public-url", metavar="URL", help="HTTP mode at this public address (else Socket Mode)")
    s.add_argument("--slack-owner", metavar="ID", help="your Slack member ID (U0123ABCD)")
    s.add_argument("--slack-api", metavar="URL", help="the Slack Web API (default https://slack.com/api/)")
    h = p.add_argument_group("time zone, accounts, service")
    h.add_argument("--timezone", metavar="ZONE", help="an IANA name (default: the detected one)")
    h.add_argument("--account", metavar="NAME", help="add [accounts.NAME] and sign in to it")
    h.add_argument("--account-provider", choices=("google", "microsoft"))
    h.add_argument("--account-client-id", metavar="ID")
    h.add_argument("--account-client-secret-env", metavar="VAR", help="Google: the variable holding the secret")
    h.add_argument("--service", action=argparse.BooleanOptionalAction, default=None,
                   help="install the systemd user unit")
    h.add_argument("--start", action=argparse.BooleanOptionalAction, default=None,
                   help="start the installed unit now (default: yes)")
    p.set_defaults(fn=None)


async def add_account(config: Config, name: str) -> int:
    """The accounts step's hand-off: exactly `anyy accounts add NAME`."""
    from gateway.cli.accounts import accounts_add

    return await accounts_add(config, argparse.Namespace(name=name, paste=False))


async def setup(args: argparse.Namespace) -> int:
    from gateway import redaction
    from gateway.cli.doctor import doctor
    from gateway.config import config_path, data_dir, load_config
    from gateway.config.secrets_file import secrets_path
    from gateway.setup.wizard import Wizard

    path, _ = config_path(args.config)
    wizard = Wizard(args, path, secrets_path(path), data_dir(), add_account)
    try:
        outcome = await wizard.run()
    except EOFError:
        print("\nSetup left; the steps finished so far are saved.", file=sys.stderr)
        return 1
    if not path.exists():
        print("Nothing was written.")
        return 1
    config = load_config(str(path))
    redaction.install(config)
    written = " and ".join(str(p) for p in (path, secrets_path(path)) if p.exists())
    print(f"\nYour settings: {written}. `anyy doctor` says:")
    code = await doctor(config, args)
    if outcome.failed:
        print(f"Not done: {', '.join(outcome.failed)} (run `anyy setup {outcome.failed[0]}` to try again).")
    if config.model.configured:
        print("Talk to Anyy here with `anyy chat`; `anyy run` (or the service) keeps it up for your chats"
              + (f": then write to {outcome.telegram_bot} in Telegram." if outcome.telegram_bot else "."))
    return 1 if outcome.failed or code else 0
