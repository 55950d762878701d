"""Surfaces: one module (or small package) per chat platform, built from config here."""

from __future__ import annotations

from gateway.config import Config, secret
from gateway.surfaces.base import Surface


def build_surfaces(config: Config) -> tuple[list[Surface], list[str]]:
    """The configured surfaces, and a problem line for each configured one that cannot be built.
    Platform libraries are imported only for surfaces that are configured."""
    surfaces: list[Surface] = []
    problems: list[str] = []
    if config.telegram is not None:
        token = secret(config.telegram.token_env)
        if token is None:
            problems.append(f"telegram: set ${config.telegram.token_env} to the bot token from @BotFather")
        else:
            from gateway.surfaces.telegram import TelegramSurface

            surfaces.append(TelegramSurface(config.telegram, token, config.data_dir))
    if config.slack is not None:
        cfg = config.slack
        bot, app, signing = secret(cfg.bot_token_env), secret(cfg.app_token_env), secret(cfg.signing_secret_env)
        if bot is None:
            problems.append(f"slack: set ${cfg.bot_token_env} to the bot token (xoxb-…)")
        elif cfg.mode == "socket" and app is None:
            problems.append(f"slack: socket mode needs ${cfg.app_token_env} (an app-level token, xapp-…)")
        elif cfg.mode == "http" and signing is None:
            problems.append(f"slack: http mode needs ${cfg.signing_secret_env} (the app's signing secret)")
        else:
            from gateway.surfaces.slack import SlackSurface

            surfaces.append(SlackSurface(cfg, bot, app, signing, config.data_dir))
    return surfaces, problems
