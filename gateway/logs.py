"""Logging setup: one line per event, `time level logger message` where messages are key=value."""

from __future__ import annotations

import logging
import sys


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries log request URLs at INFO, and a Telegram bot token is part of its API URL.
    for noisy in ("httpx", "httpx2", "httpcore", "mcp", "telegram", "apscheduler", "aiohttp.access", "slack_bolt", "slack_sdk"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
