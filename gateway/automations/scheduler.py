"""The automation service: rows in the store, one APScheduler job per scheduled automation.

The store is the source of truth. Each enabled automation with a next run has exactly one in-memory
job: a date job at that next run, carrying the slot (automation id, scheduled time). Firing re-reads
the row (an admin command may have deleted or disabled it), claims the slot in the store, moves the
row and the job on to the following slot, and hands the delivery to a task, so the job itself is
always short and never overlaps itself.

Policies (docs/automations.md states them for users):

* Exactly once: a slot is claimed by a unique run row before anything is delivered; delivery goes
  through the outbox under the key ``automation:<id>:<slot>``, so a retried or recovered delivery of
  one slot is still one message.
* Downtime: at start a row whose next run has passed fires once, immediately, marked late with its
  original time; a recurring one then continues from the first slot after now (one catch-up, not one
  per missed slot). A run claimed but not finished before a stop is delivered again at start (the
  outbox key keeps it to one message).
* Without `start()` the service is in admin mode: it edits rows and never fires anything. A resident
  service picks up rows other processes changed within `sync_interval_s`.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gateway.automations.background import Background
from gateway.automations.event_message import RunPrompt, event_message
from gateway.automations.jobs import DateJobs
from gateway.automations.naming import clean_name, new_automation_id
from gateway.checkpoints import reached
from store.automations import Automations
from store.db import Store
from store.records import AutomationRecord, AutomationRun, Origin, Outbound, iso, parse_iso, utcnow
from store.triggers import TriggerEvent, TriggerEvents, event_slot, slot_event_key
from toolsets.schedule import (
    HORIZON,
    PAST_HORIZON,
    ActionModel,
    AutomationError,
    Once,
    Reminder,
    ScheduleModel,
    check_pair,
    parse_action,
    parse_schedule,
    when_label,
)

log = logging.getLogger(__name__)

Enqueue = Callable[[Outbound, str], Awaitable[int]]
Clock = Callable[[], datetime]
MayRun = Callable[[str], Awaitable[bool]]  # user key -> whether that user still has access

# Re-read rows changed a little before the last sync: another process stamps `updated_at` before its
# write commits, so a change can become visible with a slightly older stamp.
SYNC_OVERLAP = timedelta(seconds=5)


class AutomationService:
    """Creates, changes, deletes, fires and reports automations; row and job always change together.

    Args:
        store: the open store.
        tz: the owner's zone, the default for schedules without a "timezone".
        enqueue: the outbox's enqueue(outbound, dedupe_key) -> outbox id.
        run_prompt: runs a model turn for a prompt automation's scheduled slot (the turn id comes from
            both, so a re-run continues) in its own session and returns the reply (None: prompt
            automations fail with a clear notice, e.g. in admin tools).
        clock: the current aware time (tests of DST use a fixed one; the scheduler uses the real clock).
        late_after: a firing more than this behind its slot is marked late even without downtime.
        retry_delays: seconds to wait between attempts to enqueue a delivery.
        sync_interval_s: how often a resident service picks up rows changed by other processes.
        may_run: whether the automation's user still has access (`Access.allowed_key`); a run of a user
            who has none is recorded as skipped and delivers nothing.
    """

    def __init__(self, store: Store, tz: ZoneInfo, enqueue: Enqueue, run_prompt: RunPrompt | None = None, *,
                 clock: Clock = utcnow, late_after: timedelta = timedelta(minutes=1),
                 retry_delays: Sequence[float] = (1.0, 5.0, 30.0), sync_interval_s: float = 30.0,
                 may_run: MayRun | None = None) -> None:
        self.repo = Automations(store)
        self.events = TriggerEvents(store)
        self._may_run = may_run
        self.tz = tz
        self._enqueue = enqueue
        self._run_prompt = run_prompt
        self._clock = clock
        self._late_after = late_after
        self._retry_delays = tuple(retry_delays)
        self._sync_interval_s = sync_interval_s
        self._jobs: DateJobs | None = None  # while started: the jobs (`gateway.automations.jobs`)
        self._sync_task: asyncio.Task[None] | None = None
        self._started_at: datetime | None = None
        self._synced_at = utcnow()
        # Serializes "read row, write row, place job" so a firing and an edit never interleave.
        self._lock = asyncio.Lock()
        # Deliveries under way: `Gateway.idle` waits for them, as a caller believing all is delivered must.
        self.runs = Background()

    @property
    def running(self) -> bool:
        """Whether this service fires schedules (False in admin mode)."""
        return self._jobs is not None

    def now(self) -> datetime:
        """The service's current time (aware)."""
        return self._clock()

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Rebuild the jobs from the rows, deliver interrupted runs, and start firing."""
        if self._jobs is not None:
            raise RuntimeError("the automation service is already running")
        self._started_at = self._clock()
        self._synced_at = utcnow()
        slots = await self.repo.scheduled_slots()
        # Read before the scheduler starts: afterwards a fresh claim could look interrupted.
        interrupted = await self.repo.unfinished_runs()
        async with self._lock:
            self._jobs = DateJobs(self._fire)
            for automation_id, slot in slots:
                self._place(automation_id, slot)
            self._sync_task = asyncio.create_task(self._sync_every(), name="automations-sync")
            for run in interrupted:
                row = await self.repo.get(run.automation_id)
                if row is not None:
                    self.runs.spawn(self._execute(row, run.id, run.scheduled_for, run.late))
        missed = sum(parse_iso(slot) < self._started_at for _, slot in slots)
        log.info("automations started scheduled=%d missed=%d interrupted=%d", len(slots), missed, len(interrupted))

    async def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop firing; wait up to `timeout_s` for deliveries under way, then cancel the rest (a
        cancelled run stays claimed and is delivered at the next start)."""
        async with self._lock:
            jobs, self._jobs, sync, self._sync_task = self._jobs, None, self._sync_task, None
        if jobs is not None:
            jobs.shutdown()
        if sync is not None:
            sync.cancel()
            await asyncio.gather(sync, return_exceptions=True)
        await self.runs.stop(timeout_s)
        log.info("automations stopped")

    # -- the owner's operations --------------------------------------------------------------------

    async def create(self, user_key: str, origin: Origin, name: str, schedule: ScheduleModel,
                     action: ActionModel) -> AutomationRecord:
        """Store a new automation delivering to `origin` and schedule its first run."""
        now = self._clock()
        schedule = self._pinned(schedule)
        check_pair(schedule, action)
        first = self._first_run(schedule, now)
        rec = AutomationRecord(
            id=new_automation_id(), user_key=user_key, origin=origin, name=clean_name(name),
            schedule=schedule.model_dump(mode="json"), action=action.model_dump(mode="json"),
            created_at=iso(now), updated_at=iso(now), next_run_at=iso(first) if first else None)
        async with self._lock:
            await self.repo.create(rec, actor=user_key)
            self._place(rec.id, rec.next_run_at)
        log.info("automation created id=%s user=%s kind=%s next=%s", rec.id, user_key, action.kind, rec.next_run_at)
        return rec

    async def update(self, user_key: str, automation_id: str, *, name: str | None = None,
                     schedule: ScheduleModel | None = None, action: ActionModel | None = None,
                     enabled: bool | None = None, actor: str | None = None) -> AutomationRecord:
        """Change the given fields. A new schedule, or enabling a paused automation, plans the next
        run from now; pausing clears it. The audit names `actor` (default: the user), e.g. the
        owner's dashboard pausing a guest's automation."""
        fields: dict[str, Any] = {}
        if name is not None:
            fields["name"] = clean_name(name)
        if action is not None:
            fields["action"] = action.model_dump(mode="json")
        async with self._lock:
            row = await self._owned(user_key, automation_id)
            check_pair(schedule or parse_schedule(row.schedule), action or parse_action(row.action))
            if schedule is not None:
                schedule = self._pinned(schedule)
                fields["schedule"] = schedule.model_dump(mode="json")
            if enabled is not None:
                fields["enabled"] = enabled
            active = row.enabled if enabled is None else enabled
            if not active:
                fields["next_run_at"] = None
            elif schedule is not None or not row.enabled:
                plan = schedule or parse_schedule(row.schedule)
                first = self._first_run(plan, self._clock())
                fields["next_run_at"] = iso(first) if first else None
            if not fields:
                raise AutomationError("nothing to change: give a name, schedule, action or enabled")
            rec = await self.repo.update(automation_id, actor or user_key, **fields)
            if rec is None:
                raise AutomationError(f"no automation {automation_id}")
            self._place(rec.id, _slot(rec))
        log.info("automation updated id=%s user=%s fields=%s", automation_id, user_key, ",".join(sorted(fields)))
        return rec

    async def delete(self, user_key: str, automation_id: str) -> AutomationRecord:
        """Delete one of the user's automations (and its run log)."""
        async with self._lock:
            await self._owned(user_key, automation_id)
            return await self._delete(automation_id, actor=user_key)

    async def admin_delete(self, automation_id: str, actor: str = "admin") -> AutomationRecord:
        """Delete any automation by id (the CLI). A resident process skips its job when it comes due."""
        async with self._lock:
            return await self._delete(automation_id, actor=actor)

    async def list(self, user_key: str) -> builtins.list[AutomationRecord]:
        """The user's automations, soonest next run first (finished and paused ones last)."""
        return await self.repo.list(user_key)

    async def list_all(self) -> builtins.list[AutomationRecord]:
        """Every user's automations (the CLI)."""
        return await self.repo.list(None)

    async def history(self, user_key: str, automation_id: str, limit: int = 10) -> builtins.list[AutomationRun]:
        """The user's automation's most recent runs, newest first."""
        await self._owned(user_key, automation_id)
        return await self.repo.history(automation_id, limit)

    async def run_now(self, user_key: str, automation_id: str) -> AutomationRun:
        """Run the automation once now, outside its schedule (which is unchanged), and wait for it."""
        async with self._lock:
            row = await self._owned(user_key, automation_id)
            if not row.enabled:
                raise AutomationError(f"automation {automation_id} is paused; enable it first")
            slot = iso(self._clock())
            run_id = await self.repo.claim_run(row.id, slot, next_run_at=row.next_run_at)
        if run_id is None:
            raise AutomationError(f"automation {automation_id} is already running")
        await self._execute(row, run_id, slot, late=False)
        run = await self.repo.get_run(run_id)
        assert run is not None
        return run

    # -- firing ------------------------------------------------------------------------------------

    async def fire_event(self, automation_id: str, event: TriggerEvent) -> bool:
        """Record `event` and fire the automation for it once: claim the run under the event's slot (as a
        clock firing claims its slot), deliver in the background. False when it fired for the event before,
        is gone or paused, or this service does not fire (admin mode)."""
        stored = await self.events.record(event)
        async with self._lock:
            row = await self.repo.get(automation_id)
            run_id = None if self._jobs is None or row is None or not row.enabled else \
                await self.repo.claim_run(row.id, event_slot(stored), next_run_at=row.next_run_at)
            if row is None or run_id is None:
                return False
            await reached("trigger.claimed")
            log.info("automation fired id=%s event=%s", automation_id, stored.key)
            self.runs.spawn(self._execute(row, run_id, event_slot(stored), late=False))
        return True

    async def _fire(self, automation_id: str, slot: str) -> None:
        """The job: claim the slot, move row and job to the next slot, hand off the delivery."""
        async with self._lock:
            if self._jobs is None or self._started_at is None:
                return  # fired while shutting down; the slot is still unclaimed for the next start
            row = await self.repo.get(automation_id)
            if row is None or not row.enabled or row.next_run_at != slot:
                log.info("automation skipped id=%s slot=%s reason=%s", automation_id, slot,
                         "deleted" if row is None else "disabled" if not row.enabled else "rescheduled")
                return
            now, due = self._clock(), parse_iso(slot)
            following = parse_schedule(row.schedule).next_fire(max(now, due), due, self.tz)
            late = due < self._started_at or now - due > self._late_after
            next_run_at = iso(following) if following else None
            run_id = await self.repo.claim_run(row.id, slot, late=late, next_run_at=next_run_at)
            row = row.model_copy(update={"next_run_at": next_run_at})
            self._place(row.id, next_run_at)
            if run_id is None:
                log.info("automation slot already claimed id=%s slot=%s", automation_id, slot)
                return
            log.info("automation fired id=%s slot=%s late=%s lag_s=%.3f next=%s", automation_id, slot, late,
                     (now - due).total_seconds(), next_run_at)
            self.runs.spawn(self._execute(row, run_id, slot, late))

    # APScheduler checks each job's arguments against inspect.signature(func), computed afresh for a bound
    # method: most of the cost of rebuilding 10,000 jobs at start. `__signature__` is returned first: set it.
    _fire.__signature__ = inspect.signature(_fire)  # type: ignore[attr-defined]

    async def _execute(self, row: AutomationRecord, run_id: int, slot: str, late: bool) -> None:
        """Produce the message for one claimed run and put it in the outbox."""
        if self._may_run is not None and not await self._may_run(row.user_key):
            log.info("automation skipped id=%s slot=%s reason=no_access", row.id, slot)
            await self.repo.finish_run(run_id, "failed", "skipped: its user no longer has access")
            return
        status = "delivered"
        try:
            text = await self._message(row, slot, late)
        except Exception as exc:  # a failed model turn is reported to the owner, not swallowed
            log.warning("automation failed id=%s slot=%s error=%s", row.id, slot, exc)
            status, text = "failed", f"⚠️ Automation “{row.name}” failed: {exc}"
        try:
            await self._deliver(Outbound(origin=row.origin, text=text), f"automation:{row.id}:{slot}")
        except Exception:
            # The run stays claimed, so the next start delivers it (under the same outbox key).
            log.exception("automation delivery failed id=%s slot=%s", row.id, slot)
            return
        await self.repo.finish_run(run_id, status, text)

    async def _message(self, row: AutomationRecord, slot: str, late: bool) -> str:
        if (key := slot_event_key(slot)) is not None:
            return await event_message(self.events, self._run_prompt, row, slot, key)
        action = parse_action(row.action)
        note = ""
        if late:
            zone = parse_schedule(row.schedule).zone(self.tz)
            note = f"(late — was due {when_label(parse_iso(slot), zone, self._clock())}) "
        if isinstance(action, Reminder):
            return f"⏰ {note}{action.text}"
        if self._run_prompt is None:
            raise AutomationError("no model is available to run this automation's prompt")
        return f"{note}{await self._run_prompt(row, slot)}"

    async def _deliver(self, outbound: Outbound, key: str) -> None:
        for attempt, delay in enumerate((*self._retry_delays, None), start=1):
            try:
                await self._enqueue(outbound, key)
                return
            except Exception as exc:
                if delay is None:
                    raise
                log.warning("automation enqueue retry key=%s attempt=%d error=%s", key, attempt, exc)
                await asyncio.sleep(delay)

    async def _sync_every(self) -> None:
        while True:  # one sync at a time, as APScheduler ran it when it was a job
            await asyncio.sleep(self._sync_interval_s)
            try:
                await self._sync()
            except Exception:  # the next round tries again
                log.exception("automations sync failed")

    async def _sync(self) -> None:
        """Place the jobs of rows another process (the CLI, `anyy chat`) created or changed."""
        started = utcnow()
        async with self._lock:
            if self._jobs is None:
                return
            rows = await self.repo.changed_since(iso(self._synced_at - SYNC_OVERLAP))
            for row in rows:
                if self._jobs.slot(row.id) != _slot(row):
                    self._place(row.id, _slot(row))
        self._synced_at = started

    # -- helpers -----------------------------------------------------------------------------------

    def _place(self, automation_id: str, slot: str | None) -> None:
        """Make the scheduler hold a job at `slot` for the automation, or none (nothing in admin mode)."""
        if self._jobs is not None:
            self._jobs.place(automation_id, slot)

    async def _owned(self, user_key: str, automation_id: str) -> AutomationRecord:
        """The automation if it belongs to `user_key`; someone else's looks exactly like a missing one."""
        row = await self.repo.get(automation_id)
        if row is None or row.user_key != user_key:
            raise AutomationError(f"no automation {automation_id}")
        return row

    async def _delete(self, automation_id: str, actor: str) -> AutomationRecord:
        rec = await self.repo.delete(automation_id, actor)
        if rec is None:
            raise AutomationError(f"no automation {automation_id}")
        self._place(automation_id, None)
        log.info("automation deleted id=%s actor=%s", automation_id, actor)
        return rec

    def _pinned(self, schedule: ScheduleModel) -> ScheduleModel:
        """The schedule with its zone written out, so a later change of the owner's zone moves nothing."""
        return schedule.model_copy(update={"timezone": schedule.timezone or self.tz.key})

    def _first_run(self, schedule: ScheduleModel, now: datetime) -> datetime | None:
        """The first clock firing; None for a trigger (events fire it)."""
        try:
            first = schedule.next_fire(now, None, self.tz)
        except OverflowError:  # a wall time near year 9999 moved to UTC
            raise AutomationError(PAST_HORIZON) from None
        if first is not None and first - now > HORIZON:
            raise AutomationError(PAST_HORIZON)
        if first is None and isinstance(schedule, Once):
            zone = schedule.zone(self.tz)
            raise AutomationError(f"{schedule.at:%Y-%m-%d %H:%M} ({zone.key}) is in the past; "
                                  f"it is now {now.astimezone(zone):%Y-%m-%d %H:%M}")
        return first


def _slot(row: AutomationRecord) -> str | None:
    """The slot the scheduler should hold for a row: its next run while enabled."""
    return row.next_run_at if row.enabled else None
