"""Prompt automations' model turns, paced so a burst of firings cannot overspend a budget.

A webhook, a mailbox or a calendar can fire one automation many times at once. Checked before its turn
each run would see the ledger as it was before any of them spent, and all would call the model. So:

* runs of one automation go one at a time (a lane per automation, which on a shared store is a lease, so
  residents sharing PostgreSQL take turns too), and at most `AT_ONCE` automation turns run at once in a
  process;
* the budget is checked when a run has its place, so run N sees what runs 1..N-1 spent (each writes its
  usage before it lets the next one go). A run skipped for budget still delivers its "skipped" line.

Each trigger firing runs in a session of its own (`automation:<id>:<event digest>`): an event's outside
content (up to 256 KB of webhook body, an email's text) never rides into later firings' requests, and an
approval's follow-up lands beside the firing that asked for it. A clock-scheduled prompt keeps one session
(`automation:<id>`), so a daily digest keeps its continuity.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from gateway.services.budget import run_allowance
from gateway.turns.lanes import Lanes
from store.records import AutomationRecord, parse_iso
from store.triggers import TriggerEvent, slot_time
from toolsets.untrusted import new_boundary, wrap

if TYPE_CHECKING:
    from gateway.turns.runtime import Runtime

AT_ONCE = 2  # automation model turns running at once in one process


class AutomationRuns:
    """Runs prompt automations' turns (`run`), one at a time per automation and `at_once` in all."""

    def __init__(self, runtime: Runtime, at_once: int = AT_ONCE) -> None:
        self.runtime = runtime
        self._lanes = Lanes(runtime.store)
        self._slots = asyncio.Semaphore(at_once)

    async def run(self, rec: AutomationRecord, slot: str, event: TriggerEvent | None = None) -> str:
        """A prompt automation's model turn for its scheduled `slot`, without the automation toolset (so
        automations cannot multiply themselves). The turn id is derived from (automation, slot): a run
        re-delivered after a crash continues its own turn instead of repeating it. A trigger's `event`
        follows the prompt as outside content, and the turn counts as having read it."""
        # The automation's lane first: a run waiting behind its own automation holds no global place.
        async with self._lanes.hold(f"automation-run:{rec.id}"), self._slots:
            runtime = self.runtime
            skipped, per_run = await run_allowance(runtime.services.get("budget"), runtime.access, rec.user_key,
                                                   rec.name)
            if skipped is not None:
                return skipped
            session_id, turn_id = f"automation:{rec.id}", f"auto-{rec.id}-{parse_iso(slot_time(slot)):%Y%m%dT%H%M%S%f}"
            prompt, tainted = rec.action.get("prompt", ""), []
            if event is not None:
                digest = hashlib.sha256(event.key.encode()).hexdigest()[:12]
                session_id, turn_id = f"{session_id}:{digest}", f"{turn_id}-{digest}"
                prompt = f"{prompt}\n\n{wrap(event.source, event.text, new_boundary())}"
                tainted = [event.source]
            session = await runtime.sessions.get_or_create(session_id, rec.origin, rec.user_key, kind="automation")
            text = await runtime.model_turn(session, turn_id, user_text=prompt, exclude={"automation"},
                                            tainted_by=tainted, max_tokens=per_run)
            return text or ""
