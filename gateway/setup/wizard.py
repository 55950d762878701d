"""The wizard: runs the steps in order (or the one asked for), writes each step's answers as soon as the
step has checked them (secrets to secrets.env first, then the config), so a wizard left half-way keeps
what it finished. Ctrl-C skips the step being asked; Ctrl-D leaves setup."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config import Config, ConfigError
from gateway.config.secrets_file import read_secrets, save_secrets
from gateway.setup.ask import Ask, SetupError
from gateway.setup.config_file import ConfigFile

log = logging.getLogger(__name__)

STEPS = ("model", "telegram", "slack", "zone", "accounts", "service")
TITLES = {"model": "the language model", "telegram": "Telegram", "slack": "Slack", "zone": "the time zone",
          "accounts": "a Google or Microsoft account (mail, calendar)",
          "service": "a systemd user service that keeps Anyy running"}
ACCOUNT_COMMENTS = {"provider": "google or microsoft", "client_id": "your OAuth client (docs/accounts.md)",
                    "client_secret_env": "the variable in secrets.env holding the client secret"}
AddAccount = Callable[[Config, str], Awaitable[int]]  # `anyy accounts add NAME`, given by the CLI


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    telegram_bot: str = ""


class Wizard:
    def __init__(self, args: Any, config_path: Path, secrets_path: Path, data_dir: Path,
                 add_account: AddAccount) -> None:
        self.args = args
        self.config_path = config_path
        self.secrets_path = secrets_path
        self.data_dir = data_dir
        self.add_account = add_account
        self.ask = Ask(interactive=not args.yes and sys.stdin.isatty() and sys.stdout.isatty())
        self.outcome = Outcome()

    def wanted_without_asking(self, step: str) -> bool:
        """With --yes, a step runs when its flags are given (the zone always: it has a detected answer)."""
        a = self.args
        return {"model": a.model_provider is not None, "telegram": a.telegram_token_env is not None,
                "slack": a.slack_bot_token_env is not None, "zone": True, "accounts": a.account is not None,
                "service": bool(a.service)}[step]

    async def run(self) -> Outcome:
        steps = [self.args.step] if self.args.step else [s for s in STEPS if s not in (self.args.skip or [])]
        if self.ask.interactive and not self.args.step:
            self.ask.say(f"Setting up Anyy: {self.config_path} and {self.secrets_path}. Each step can be "
                         "skipped (answer n, or Ctrl-C while it asks) and run again alone: anyy setup STEP.")
        for step in steps:
            if not self.args.step:
                if self.ask.interactive:
                    default = step in ("model", "telegram", "zone")
                    if not await self.ask.confirm(f"\nSet up {TITLES[step]}?", default=default,
                                                  given=True if self.wanted_without_asking(step) and
                                                  step != "zone" else None):
                        continue
                elif not self.wanted_without_asking(step):
                    continue
            try:
                await self.step(step)
            except (KeyboardInterrupt, asyncio.CancelledError):
                # Ctrl-C at a prompt is prompt_toolkit's KeyboardInterrupt; while the step waits (for a /start,
                # a model) it is asyncio.run's cancel of this task, taken back here. A second Ctrl-C leaves.
                if (task := asyncio.current_task()) is not None and task.cancelling():
                    task.uncancel()
                self.ask.say(f"\n(skipped {step})")
            except (SetupError, ConfigError) as exc:
                self.ask.say(f"✗ {step}: {exc}")
                self.outcome.failed.append(step)
        return self.outcome

    async def step(self, step: str) -> None:
        file = ConfigFile(self.config_path)
        current = file.check()
        secrets = read_secrets(self.secrets_path)
        new_secrets: dict[str, str] = {}
        if step == "model":
            from gateway.setup.model_step import CALLS_TOOLS, model_step, write_model

            answer = await model_step(self.ask, self.args, current.model, secrets)
            if answer.verdict != CALLS_TOOLS and not await self.ask.confirm("Keep it anyway?", default=False):
                raise SetupError(f"not saved: {answer.verdict}")
            if answer.key and answer.config.api_key_env:
                new_secrets[answer.config.api_key_env] = answer.key
            write_model(answer, lambda k, v, c: file.set(("model",), k, v, c))
        elif step == "telegram":
            from gateway.setup.telegram_step import telegram_step, write_telegram

            tg = await telegram_step(self.ask, self.args, current.telegram, secrets)
            new_secrets[tg.token_env] = tg.token
            write_telegram(tg, current.telegram, lambda k, v, c: file.set(("telegram",), k, v, c))
            self.outcome.telegram_bot = tg.bot
        elif step == "slack":
            from gateway.setup.slack_step import slack_step, write_slack

            sl = await slack_step(self.ask, self.args, current.slack, secrets)
            new_secrets.update(sl.secrets)
            write_slack(sl, current.slack, lambda k, v, c: file.set(("slack",), k, v, c))
        elif step == "zone":
            from gateway.setup.host_steps import zone_step

            zone = await zone_step(self.ask, self.args, current.runtime.timezone)
            file.set(("runtime",), "timezone", zone, "reminders and times are in this zone")
        elif step == "accounts":
            await self.account(file)
            return
        elif step == "service":
            from gateway.setup.host_steps import service_step

            self.ask.say(f"Service: {await service_step(self.ask, self.args, self.secrets_path, self.data_dir)}")
            self.outcome.done.append(step)
            return
        self.save(file, new_secrets)
        self.outcome.done.append(step)

    def save(self, file: ConfigFile, new_secrets: dict[str, str]) -> Config:
        file.add(("runtime",), "welcome", True, "each owner's first message on a surface gets a short welcome")
        file.check()  # an invalid result writes nothing, secrets included
        if new_secrets:
            save_secrets(self.secrets_path, new_secrets)
            os.environ.update(new_secrets)  # what this process does next (a sign-in, doctor) uses them
        config = file.save()
        log.info("setup_saved config=%s secrets=%d", self.config_path, len(new_secrets))
        return config

    async def account(self, file: ConfigFile) -> None:
        from gateway.config import load_config
        from gateway.setup.host_steps import account_step

        answer = await account_step(self.ask, self.args)
        for key, value in answer.table.items():
            file.set(("accounts", answer.name), key, value, ACCOUNT_COMMENTS[key])
        self.save(file, answer.secrets)
        self.ask.say(f"Signing in to {answer.name!r} (anyy accounts add {answer.name}):")
        code = await self.add_account(load_config(str(self.config_path)), answer.name)
        if code:
            raise SetupError(f"the sign-in did not finish; run `anyy accounts add {answer.name}` to try again")
        self.outcome.done.append("accounts")
