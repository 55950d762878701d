"""The automation service's in-memory jobs: one APScheduler date job per scheduled automation.

APScheduler is imported with the first job (its import scans entry points and loads multiprocessing for
its process pool, ~25 ms): a process whose store holds no scheduled automation starts without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import TYPE_CHECKING, Any

from store.records import parse_iso

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

JOB_DEFAULTS: dict[str, Any] = {
    # APScheduler's default (1 s) silently drops a job that starts late, e.g. after a busy moment or a
    # suspended laptop. Lateness is our policy (delivered, marked late), so never drop.
    "misfire_grace_time": None,
    # A job that missed several runs runs once.
    "coalesce": True,
    # Jobs only claim a slot and hand off the delivery, so one instance per automation is enough.
    "max_instances": 1,
}

Fire = Callable[[str, str], Awaitable[None]]  # (automation id, slot)


class DateJobs:
    """At most one job per automation, firing `fire(automation_id, slot)` at the slot's time. Made in a
    running event loop; the scheduler starts with the first job."""

    def __init__(self, fire: Fire) -> None:
        self._fire = fire
        self._scheduler: AsyncIOScheduler | None = None

    def place(self, automation_id: str, slot: str | None) -> None:
        """Hold a job at `slot` for the automation (replacing its job), or none."""
        if slot is not None:
            from apscheduler.triggers.date import DateTrigger

            if self._scheduler is None:
                from apscheduler.schedulers.asyncio import AsyncIOScheduler

                self._scheduler = AsyncIOScheduler(timezone=UTC, job_defaults=JOB_DEFAULTS)
                self._scheduler.start()
            self._scheduler.add_job(self._fire, DateTrigger(parse_iso(slot), UTC), args=(automation_id, slot),
                                    id=automation_id, name="automation", replace_existing=True)
        elif self._scheduler is not None and self._scheduler.get_job(automation_id) is not None:
            self._scheduler.remove_job(automation_id)

    def slot(self, automation_id: str) -> str | None:
        """The slot the automation's job fires at, or None without a job."""
        job = self._scheduler.get_job(automation_id) if self._scheduler is not None else None
        return job.args[1] if job is not None else None

    def shutdown(self) -> None:
        """Stop firing (jobs under way are the caller's to wait for)."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
