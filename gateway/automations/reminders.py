"""The reminder chat commands, which work without a model: /remind, /reminders, /cancel.

``/remind <when> <text>`` understands:

* a duration from now, optionally after "in": ``10m``, ``2h30m``, ``1d``, ``45s`` (units w d h m s);
* a time of day, meaning its next occurrence: ``09:00``, ``9:30``, ``9am``, ``6:15pm``;
* ``tomorrow`` and a time: ``tomorrow 09:00``;
* a date and a time: ``2026-12-01 09:00``.

Local times are in the owner's zone and follow the schedule DST policy (`toolsets.schedule`).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.automations.scheduler import AutomationService
from store.records import AutomationRecord, Origin, parse_iso
from toolsets.schedule import AutomationError, Once, Reminder, describe, parse_duration, parse_schedule, when_label

REMIND_USAGE = (
    "Usage: /remind <when> <text>, for example /remind 10m stretch · /remind 2h30m call back · "
    "/remind 09:00 standup · /remind tomorrow 9am dentist · /remind 2026-12-01 09:00 dentist"
)
CANCEL_USAGE = "Usage: /cancel <id> (the ids are in /reminders)"

_DURATION = re.compile(r"(?:\d+[wdhms])+", re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CLOCK = re.compile(r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?(?P<ampm>am|pm)?", re.IGNORECASE)


class ReminderSyntaxError(ValueError):
    """The /remind arguments could not be read; the message says which part."""


def parse_remind(args: str, now: datetime, tz: ZoneInfo) -> tuple[Once, str]:
    """Read ``<when> <text>`` as of aware `now` in `tz`: the one-shot schedule and the reminder text."""
    words = args.split()
    if len(words) < 2:
        raise ReminderSyntaxError("say when and what")
    first = words[0].lower()
    if first == "in" or _DURATION.fullmatch(first):
        used = 2 if first == "in" else 1
        if first == "in" and not _DURATION.fullmatch(words[1].lower()):
            raise ReminderSyntaxError(f"cannot read the duration {words[1]!r}")
        delta = parse_duration(words[used - 1])
        if not delta:
            raise ReminderSyntaxError("the duration must be more than zero")
        # An exact instant (with its offset), so a reminder set inside a repeated DST hour stays exact.
        at = (now + delta).astimezone(tz).replace(microsecond=0)
        return Once(type="once", at=at, timezone=tz.key), _rest(args, used)
    if _DATE.fullmatch(first) or first == "tomorrow":
        if len(words) < 3:
            raise ReminderSyntaxError("say the time after the date, e.g. 09:00")
        day = now.astimezone(tz).date() + timedelta(days=1) if first == "tomorrow" else _date(first)
        at = datetime.combine(day, _clock(words[1]))
        return Once(type="once", at=at, timezone=tz.key), _rest(args, 2)
    if _CLOCK.fullmatch(first) and (":" in first or first.endswith(("am", "pm"))):
        at = datetime.combine(now.astimezone(tz).date(), _clock(first))
        today = Once(type="once", at=at, timezone=tz.key)
        if today.next_fire(now, None, tz) is None:
            return today.model_copy(update={"at": at + timedelta(days=1)}), _rest(args, 1)
        return today, _rest(args, 1)
    raise ReminderSyntaxError(f"cannot read the time {words[0]!r}")


def _rest(args: str, used: int) -> str:
    """The text after the first `used` words, with its own spacing kept."""
    parts = args.split(maxsplit=used)
    if len(parts) <= used:
        raise ReminderSyntaxError("say what to remind you of")
    return parts[used].strip()


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ReminderSyntaxError(f"there is no date {text}") from None


def _clock(text: str) -> time:
    m = _CLOCK.fullmatch(text)
    if not m:
        raise ReminderSyntaxError(f"cannot read the time {text!r}; write it like 09:00 or 9am")
    hour, minute = int(m["h"]), int(m["m"] or 0)
    if m["ampm"]:
        if not 1 <= hour <= 12:
            raise ReminderSyntaxError(f"there is no time {text}")
        hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ReminderSyntaxError(f"there is no time {text}")
    return time(hour, minute)


async def remind_command(service: AutomationService, user_key: str, origin: Origin, args: str) -> str:
    """/remind <when> <text>: set a one-shot reminder delivered to `origin`; the reply to show."""
    now = service.now()
    try:
        schedule, text = parse_remind(args, now, service.tz)
    except (ReminderSyntaxError, AutomationError) as exc:
        return f"I could not read that: {exc}.\n{REMIND_USAGE}"
    try:
        rec = await service.create(user_key, origin, text[:60], schedule, Reminder(kind="reminder", text=text))
    except AutomationError as exc:
        return f"I could not set that reminder: {exc}."
    return f"⏰ Reminder {rec.id} set for {_next_label(rec, service.tz, now)}: {text}"


async def reminders_command(service: AutomationService, user_key: str) -> str:
    """/reminders: the user's active and paused reminders and automations, soonest first."""
    now = service.now()
    rows = [r for r in await service.list(user_key) if r.next_run_at or not r.enabled]
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
        return "done"
    return when_label(parse_iso(rec.next_run_at), parse_schedule(rec.schedule).zone(default_tz), now)
