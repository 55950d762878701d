"""Before each calendar event: the next occurrences planned into the scheduler, re-planned as the
calendar changes.

Every `check_s` (30 s: a change is planned within a minute) the planner asks each before_event
trigger's calendar for its change tag (CalDAV getctag, else sync-token: one PROPFIND) and, when it
changed (or ten minutes passed, or the calendar has none, like Microsoft Graph), lists it from now to
`horizon` ahead, recurring events expanded, and holds one APScheduler date job per occurrence at its
start minus the trigger's minutes. The job's key names the occurrence by event UID and start, so a
moved event's old job is dropped and a new one placed at the new time, and a cancelled one's job is
dropped: it never fires, whether it was deleted or kept marked cancelled (iCalendar STATUS:CANCELLED on
the event or on one overridden occurrence, Graph's isCancelled). All-day events are left out unless the
trigger asks for them. Times are instants (the calendar's own zones; minutes are elapsed time), shown in
the owner's zone, so DST moves nothing. A firing records the occurrence and claims the automation's run for it
(`AutomationService.fire_event`): each occurrence fires once across restarts, re-plans and residents.
A firing time passed while the resident was down still fires while the event has not started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from connectors.calendar import instant
from connectors.ical import Event
from gateway.automations.jobs import DateJobs
from store.db import Store
from store.records import AutomationRecord, iso, utcnow
from store.triggers import TriggerEvent, automations_version
from toolsets.schedule import parse_schedule, when_label
from toolsets.schedule_triggers import BeforeEvent

log = logging.getLogger(__name__)

Fire = Callable[[str, TriggerEvent], Awaitable[bool]]
GRACE_AT_START = timedelta(minutes=1)  # a "0 minutes before" firing that is a little late still fires
RELIST_AFTER = timedelta(minutes=10)  # an unchanged calendar is still listed this often (the horizon moves)
TEXT_CHARS = 4_000


def occurrence_event(account: str, event: Event, tz: ZoneInfo, now: datetime) -> TriggerEvent:
    """The trigger event of one occurrence (its start an instant)."""
    start = instant(event.start, tz)
    when = when_label(start, tz, now)
    text = (f"Calendar event in {account}/{event.calendar}\nTitle: {event.summary}\nStarts: {when}\n"
            f"Ends: {when_label(instant(event.end, tz), tz, now)}\nLocation: {event.location}\n"
            f"Attendees: {', '.join(event.attendees)}\n\n{event.description[:TEXT_CHARS]}")
    return TriggerEvent(key=f"cal:{account}:{event.calendar}:{event.uid}:{iso(start)}", kind="before_event",
                        source=f"calendar event {event.summary[:60]}", text=text,
                        fields={"title": event.summary or "(no title)", "time": when, "location": event.location,
                                "calendar": event.calendar, "account": account})


class EventPlanner:
    """Plans the before_event triggers' firings (see the module's docstring).

    Args:
        store: the open store.
        list_all: every automation (`AutomationService.list_all`).
        fire: `AutomationService.fire_event`.
        calendars: the calendar accounts ("calendar": `AccountClients`).
        tz: the owner's zone (what times are shown in).
        may_watch: whether a user's triggers may read the calendar (user key -> bool); None: everyone's.
    """

    def __init__(self, store: Store, list_all: Callable[[], Awaitable[list[AutomationRecord]]], fire: Fire,
                 calendars: Any, tz: ZoneInfo, *, check_s: float = 30.0, horizon: timedelta = timedelta(hours=36),
                 may_watch: Callable[[str], Awaitable[bool]] | None = None) -> None:
        self._store, self._list_all, self._fire, self._calendars, self._tz = store, list_all, fire, calendars, tz
        self._check_s, self._horizon, self._may_watch = check_s, horizon, may_watch
        self._version: tuple[Any, ...] | None = None
        self._triggers: list[tuple[AutomationRecord, BeforeEvent]] = []
        self._jobs: DateJobs | None = None
        self.planned: dict[str, tuple[str, TriggerEvent]] = {}  # job id -> (firing time, event)
        self._fired: set[str] = set()  # job ids fired by this process (the store's claim is the real guard)
        self.checked = asyncio.Event()  # set after each round (tests wait on it)
        self._task: asyncio.Task[None] | None = None
        self._checking = asyncio.Lock()
        self._tags: dict[str, tuple[str, datetime]] = {}  # automation id -> (change tag, listed at)
        self.listings = 0  # calendar listings made (a round whose tags are unchanged makes none)

    async def start(self) -> None:
        self._jobs = DateJobs(self._due)
        self._task = asyncio.create_task(self._every(), name="event-planner")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._jobs is not None:
            self._jobs.shutdown()
            self._jobs = None
        self.planned.clear()

    async def _every(self) -> None:
        while True:
            try:
                await self.check()
            except Exception:  # the next round tries again
                log.exception("event_plan_failed")
            await asyncio.sleep(self._check_s)

    async def check(self) -> None:
        """Read the triggers (when automations changed) and each one's calendar; re-plan the jobs."""
        async with self._checking:  # one round at a time: the loop's and one asked for elsewhere
            await self._check()

    async def _check(self) -> None:
        version = await self._store.run(automations_version)
        if version != self._version:
            self._version = version
            self._triggers = [(rec, s) for rec in await self._list_all()
                              if rec.enabled and rec.schedule.get("type") == "before_event"
                              and isinstance(s := parse_schedule(rec.schedule), BeforeEvent)
                              and (self._may_watch is None or await self._may_watch(rec.user_key))]
        now = utcnow()
        wanted: dict[str, tuple[str, TriggerEvent]] = {}
        for rec, trigger in self._triggers:
            kept = {k: v for k, v in self.planned.items() if k.startswith(f"{rec.id}|")}
            try:
                if await self._unchanged(rec, trigger, now):
                    wanted.update(kept)
                    continue
                for job_id, at, event in await self.occurrences(rec, trigger, now):
                    wanted[job_id] = (at, event)
                self.listings += 1
            except Exception as exc:  # one unreachable calendar keeps its jobs; the others are planned
                log.warning("event_plan_calendar_failed automation=%s error=%s", rec.id, exc)
                self._tags.pop(rec.id, None)
                wanted.update(kept)
        self._fired &= set(wanted)
        wanted = {k: v for k, v in wanted.items() if k not in self._fired}
        for job_id in [k for k in self.planned if k not in wanted]:
            self._place(job_id, None)
            log.info("event_plan_dropped job=%s", job_id)
        for job_id, (at, _event) in wanted.items():
            if self.planned.get(job_id, ("",))[0] != at:
                self._place(job_id, at)
                log.info("event_plan_placed job=%s at=%s", job_id, at)
        self.planned = wanted
        self.checked.set()

    async def _unchanged(self, rec: AutomationRecord, trigger: BeforeEvent, now: datetime) -> bool:
        """Whether the calendar's change tag (CalDAV getctag / sync-token) is what it was at the last
        listing, and that listing is recent enough for its horizon. A calendar without one (Microsoft
        Graph) is listed every round."""
        _account, client = await self._calendars.pick(trigger.account)
        tag_of = getattr(client, "change_tag", None)
        tag = await tag_of(trigger.calendar) if tag_of is not None else ""
        last = self._tags.get(rec.id)
        if tag and last is not None and last[0] == tag and now - last[1] < RELIST_AFTER:
            return True
        self._tags[rec.id] = (tag, now)
        return False

    async def occurrences(self, rec: AutomationRecord, trigger: BeforeEvent,
                          now: datetime) -> list[tuple[str, str, TriggerEvent]]:
        """(job id, firing time, event) of each occurrence the trigger fires for, seen at `now`."""
        account, client = await self._calendars.pick(trigger.account)
        lead = timedelta(minutes=trigger.minutes)
        listing = await client.events(now, now + self._horizon + lead, trigger.calendar)
        tz = trigger.zone(self._tz)
        out = []
        for event in listing.events:
            if event.cancelled or (event.all_day and not trigger.all_day):
                continue
            start = instant(event.start, tz)
            at = start - lead
            late_until = start + (GRACE_AT_START if not trigger.minutes else timedelta(0))
            if at < now and now >= late_until:
                continue  # its moment has passed (the event started)
            occurrence = occurrence_event(account, event, tz, now)
            out.append((f"{rec.id}|{occurrence.key}", iso(at), occurrence))  # a past time fires at once
        return out

    def _place(self, job_id: str, at: str | None) -> None:
        if self._jobs is not None:
            self._jobs.place(job_id, at)

    async def _due(self, job_id: str, at: str) -> None:
        planned = self.planned.pop(job_id, None)
        if planned is None:
            return
        self._fired.add(job_id)
        automation_id = job_id.split("|", 1)[0]
        fired = await self._fire(automation_id, planned[1])
        log.info("event_plan_fired automation=%s at=%s fired=%s", automation_id, at, fired)
