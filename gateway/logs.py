"""Logging setup: one line per event, `time level logger message` where messages are key=value."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup_logging(level: int = logging.INFO, file: Path | None = None) -> None:
    """Log lines to stderr, or to `file` (the terminal chat: warnings must not land among the replies)."""
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(file, encoding="utf-8") if file is not None else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries log request URLs at INFO, and a Telegram bot token is part of its API URL.
    for noisy in ("httpx", "httpx2", "httpcore", "mcp", "telegram", "apscheduler", "aiohttp.access", "slack_bolt",
                  "slack_sdk"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
