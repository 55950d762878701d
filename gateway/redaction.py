"""Redaction: what `anyy doctor`, logs and error messages print never carries a credential.

Two kinds are removed: the userinfo of any URL (`https://user:pass@host` -> `https://***@host`) and the
value of every secret the config names (each `*_env` key's environment variable, each MCP `${VAR}`).
One helper, used by the log handler (gateway/logs.py), doctor's output and the CLI's error messages.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from gateway.config import Config, secret

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#@]+@")
MIN_SECRET_CHARS = 4  # shorter values would blank out ordinary words


def configured_secrets(config: Config) -> list[str]:
    """The values of the environment variables the config names as secrets (`Config.secret_env_names`:
    every `*_env` key and the MCP servers' `${VAR}`s), those that are set."""
    found = {val for name in config.secret_env_names() if (val := secret(name)) and len(val) >= MIN_SECRET_CHARS}
    return sorted(found, key=len, reverse=True)  # longest first: a secret containing another goes whole


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` without URL userinfo and without any of `secrets`."""
    text = _USERINFO.sub(r"\1***@", text)
    for value in secrets:
        text = text.replace(value, "***")
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (and traceback) through `redact` before any handler formats it."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage(), self.secrets), None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), self.secrets)
            record.exc_info = None
        return True


def install(config: Config) -> None:
    """Redact every log line from now on (the root handlers get the filter)."""
    secrets = configured_secrets(config)
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(old)
        handler.addFilter(RedactingFilter(secrets))
