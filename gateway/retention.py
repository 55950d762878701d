"""What a resident stops keeping, swept at start and every six hours:

- unpinned artifacts (row and file) older than `[artifacts] retention_days`;
- recorded trigger events (a new message's sender, subject and text; a webhook's body) older than
  `TRIGGER_EVENTS_KEPT` (30 days), unless a run they started is still unfinished. An event's key only has to outlive
  the sources' re-deliveries (a webhook sender's retries, a mail folder re-read after a crash) by a wide
  margin; past that, keeping a copy of every message that arrived only costs disk and privacy;
- finished automation runs (what each firing delivered) older than `AUTOMATION_RUNS_KEPT` (90 days): an
  automation every five minutes writes 26,000 of them in three months.

A sweep that fails is logged and retried next round; it never takes the process down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

log = logging.getLogger(__name__)

TRIGGER_EVENTS_KEPT = timedelta(days=30)
AUTOMATION_RUNS_KEPT = timedelta(days=90)
EVERY_S = 6 * 3600

Sweep = Callable[[], Awaitable[int]]  # deletes what expired; returns how many


async def sweep_once(sweeps: dict[str, Sweep]) -> None:
    """Run each sweep once, logging what it removed or that it failed."""
    for name, sweep in sweeps.items():
        try:
            removed = await sweep()
        except Exception:  # the next round retries
            log.exception("retention_sweep_failed what=%s", name)
            continue
        if removed:
            log.info("retention_swept what=%s removed=%d", name, removed)


async def run_sweeps(sweeps: dict[str, Sweep], every_s: float = EVERY_S) -> None:
    """Sweep every `every_s` seconds (the start-up sweep is the caller's)."""
    while True:
        await asyncio.sleep(every_s)
        await sweep_once(sweeps)
