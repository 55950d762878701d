"""The reminder chat commands, which work without a model: /remind, /reminders, /cancel.

``/remind <when> <text>`` reads `when` with `gateway.automations.when` (durations, clock times, days and
weekdays, in English and Chinese). Local times are in the owner's zone and follow the schedule DST policy
(`toolsets.schedule`).
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.automations.scheduler import AutomationService
from gateway.automations.when import USAGE_EXAMPLES, WhenError, parse_when
from store.records import AutomationRecord, Origin, parse_iso
from toolsets.schedule import AutomationError, Once, Reminder, describe, parse_schedule, when_label

REMIND_USAGE = f"Usage: /remind <when> <text>, for example {USAGE_EXAMPLES}"
CANCEL_USAGE = "Usage: /cancel <id> (the ids are in /reminders)"


def parse_remind(args: str, now: datetime, tz: ZoneInfo) -> tuple[Once, str]:
    """Read ``<when> <text>`` as of aware `now` in `tz`: the one-shot schedule and the reminder text.
    Raises WhenError naming the part it could not read."""
    when = parse_when(args, now, tz)
    return Once(type="once", at=when.at, timezone=tz.key), when.rest


async def remind_command(service: AutomationService, user_key: str, origin: Origin, args: str) -> str:
    """/remind <when> <text>: set a one-shot reminder delivered to `origin`; the reply to show."""
    now = service.now()
    try:
        schedule, text = parse_remind(args, now, service.tz)
    except (WhenError, AutomationError) as exc:
        return f"I could not read that: {exc}.\n{REMIND_USAGE}"
    try:
        rec = await service.create(user_key, origin, text[:60], schedule, Reminder(kind="reminder", text=text))
    except AutomationError as exc:
        return f"I could not set that reminder: {exc}."
    return f"⏰ Reminder {rec.id} set for {_next_label(rec, service.tz, now)}: {text}"


async def reminders_command(service: AutomationService, user_key: str) -> str:
    """/reminders: the user's active and paused reminders and automations, soonest first."""
    now = service.now()
    rows = [r for r in await service.list(user_key)
            if r.next_run_at or not r.enabled or parse_schedule(r.schedule).event_driven]
    if not rows:
        return "No reminders. Set one with /remind 10m stretch."
    lines = ["Your reminders (cancel one with /cancel <id>):"]
    for rec in rows:
        lines.append(f"{rec.id} · {_next_label(rec, service.tz, now)} · "
                     f"{describe(parse_schedule(rec.schedule), service.tz)} · {rec.name}")
    return "\n".join(lines)


async def cancel_command(service: AutomationService, user_key: str, args: str) -> str:
    """/cancel <id>: delete one of the user's reminders or automations."""
    words = args.split()
    if len(words) != 1:
        return CANCEL_USAGE
    try:
        rec = await service.delete(user_key, words[0])
    except AutomationError:
        return f"There is no reminder {words[0]}. {CANCEL_USAGE}"
    return f"Cancelled {rec.id} ({rec.name})."


def _next_label(rec: AutomationRecord, default_tz: ZoneInfo, now: datetime) -> str:
    if not rec.enabled:
        return "paused"
    if rec.next_run_at is None:
        return "on each event" if parse_schedule(rec.schedule).event_driven else "done"
    return when_label(parse_iso(rec.next_run_at), parse_schedule(rec.schedule).zone(default_tz), now)
