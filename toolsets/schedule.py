"""The canonical schedule and action objects of automations, their validation, and when they fire.

Schedules (each with an optional IANA ``timezone``; the owner's zone when absent)::

    {"type": "once", "at": "2026-12-01T09:00:00"}
    {"type": "every", "mode": "interval", "interval": "30m"}
    {"type": "every", "mode": "cron", "cron": "0 9 * * 1-5"}

Wall-clock times are mapped to instants deterministically (`resolve_local`): a local time that does not
exist (skipped by a DST jump) moves forward to the first instant after the jump; a local time that
exists twice (DST fall-back) means its first occurrence. Intervals are elapsed time and ignore DST.
Everything here is pure: callers pass the current time in.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    TypeAdapter,
    WithJsonSchema,
    field_validator,
)

from toolsets.cron import parse_cron
from toolsets.schedule_base import AutomationError, ScheduleBase, ScheduleError, zone_named
from toolsets.schedule_triggers import (
    DEFAULT_LINES,
    TRIGGER_TYPES,
    BeforeEvent,
    EmailTrigger,
    TriggerModel,
    WebhookTrigger,
    describe_trigger,
)

__all__ = ["AutomationError", "ScheduleError", "zone_named"]  # re-exported: callers import them from here

LEGACY_FIELDS = ("when", "every", "cron", "recurring")
CANONICAL_FORMS = (
    'use a schedule object: {"type": "once", "at": "2026-12-01T09:00:00"}, '
    '{"type": "every", "mode": "interval", "interval": "30m"} or '
    '{"type": "every", "mode": "cron", "cron": "0 9 * * 1-5"}, each with an optional "timezone" '
    '(an IANA name such as "Europe/Berlin"); or a trigger: {"type": "email", "folder": "INBOX", '
    '"from": ["*@bank.example"]}, {"type": "before_event", "minutes": 10} or {"type": "webhook", "name": "ci"}'
)
# How far ahead a one-shot schedule (a reminder, `/remind`) may be: further is refused by name, before
# any date arithmetic near year 9999 could overflow.
HORIZON_YEARS = 10
HORIZON = timedelta(days=3653)  # 10 years, leap days included
PAST_HORIZON = f"that is more than {HORIZON_YEARS} years ahead; a reminder can be at most {HORIZON_YEARS} years away"
MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=366)
_DURATION = re.compile(r"(\d+)\s*([wdhms])", re.IGNORECASE)
_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def legacy_error(fields: list[str]) -> ScheduleError:
    """The error for legacy schedule fields, showing the canonical form."""
    return ScheduleError(f"legacy schedule field(s) {', '.join(fields)} are not supported; {CANONICAL_FORMS}")


def parse_duration(text: str) -> timedelta:
    """``30m``, ``2h30m``, ``1d``, ``45s``, ``1w`` (units w d h m s, combinable) as a timedelta."""
    compact = text.strip()
    if not compact or _DURATION.sub("", compact).strip():
        raise ScheduleError(f"cannot read the duration {text!r}; write it like 30m, 2h30m, 1d or 45s")
    try:
        return sum((timedelta(**{_UNITS[u.lower()]: int(n)}) for n, u in _DURATION.findall(compact)), timedelta())
    except OverflowError:
        raise ScheduleError(f"the duration {text!r} is too long") from None


def resolve_local(wall: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of naive wall-clock time `wall` in `tz`, by the documented DST policy.

    Ambiguous (fall-back) times take their first occurrence (fold=0). Nonexistent (spring-forward)
    times take the instant of the jump itself, the first valid instant after them: 02:30 on a night
    that jumps from 02:00 to 03:00 becomes 03:00.
    """
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall.replace(fold=0):
        return first
    # In a gap, fold=1 reads the wall time with the old offset and fold=0 with the new one; the jump
    # lies between the two readings. Bisect to the second at which the offset changes.
    lo, hi = wall.replace(tzinfo=tz, fold=1).astimezone(UTC), first
    lo, hi = min(lo, hi), max(lo, hi)
    after = hi.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + timedelta(seconds=(hi - lo).total_seconds() // 2)
        if mid.astimezone(tz).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi


class Once(ScheduleBase):
    """Fire once at a local wall-clock time (or at an exact instant when `at` carries an offset)."""

    type: Literal["once"]
    at: datetime = Field(description="local date and time, e.g. 2026-12-01T09:00:00")

    @property
    def recurring(self) -> bool:
        return False

    def instant(self, default_tz: ZoneInfo) -> datetime:
        if self.at.tzinfo is not None:
            return self.at.astimezone(UTC)
        return resolve_local(self.at, self.zone(default_tz))

    def next_fire(self, after: datetime, anchor: datetime | None, default_tz: ZoneInfo) -> datetime | None:
        at = self.instant(default_tz)
        return at if at > after else None


class Interval(ScheduleBase):
    """Fire every fixed stretch of elapsed time (30m, 2h, 1d), whatever the wall clock does."""

    type: Literal["every"]
    mode: Literal["interval"]
    interval: str = Field(description="e.g. 30m, 2h, 1h30m, 1d (units w d h m s)")

    @field_validator("interval")
    @classmethod
    def _valid_interval(cls, v: str) -> str:
        length = parse_duration(v)
        if not MIN_INTERVAL <= length <= MAX_INTERVAL:
            raise ScheduleError(f"interval {v!r} must be between 1s and 366d")
        return v.strip()

    @property
    def length(self) -> timedelta:
        return parse_duration(self.interval)

    def next_fire(self, after: datetime, anchor: datetime | None, default_tz: ZoneInfo) -> datetime | None:
        if anchor is None:
            return after + self.length
        # The smallest anchor + n * interval that is later than `after` (n may be 0 or negative).
        return anchor + ((after - anchor) // self.length + 1) * self.length


class Cron(ScheduleBase):
    """Fire on a five-field crontab (minute hour day-of-month month day-of-week) in local time."""

    type: Literal["every"]
    mode: Literal["cron"]
    cron: str = Field(description="crontab, e.g. '0 9 * * 1-5' = 09:00 Monday to Friday")

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        parse_cron(v)
        return v.strip()

    def next_fire(self, after: datetime, anchor: datetime | None, default_tz: ZoneInfo) -> datetime | None:
        tz, cron = self.zone(default_tz), parse_cron(self.cron)
        wall = after.astimezone(tz).replace(tzinfo=None)
        # Several wall times can map to the same or an earlier instant around a transition (a gap
        # collapses onto the jump, a repeated hour maps to its first pass); step until strictly later.
        while True:
            candidate = cron.next_after(wall)
            if candidate is None:
                return None
            at = resolve_local(candidate, tz)
            if at > after:
                return at
            wall = candidate


def _reject_legacy(data: Any) -> Any:
    """Turn the shapes older tools used into errors that show the canonical form."""
    if isinstance(data, BaseModel):
        return data
    if not isinstance(data, dict):
        raise ScheduleError(f"schedule must be an object; {CANONICAL_FORMS}")
    legacy = [f for f in LEGACY_FIELDS if f in data and not (f == "cron" and data.get("mode") == "cron")]
    if legacy:
        raise legacy_error(legacy)
    if data.get("type") not in ("once", "every", *TRIGGER_TYPES):
        raise ScheduleError(f"unknown schedule type {data.get('type')!r}; {CANONICAL_FORMS}")
    if data["type"] == "every" and data.get("mode") not in ("interval", "cron"):
        raise ScheduleError(f"an 'every' schedule needs mode 'interval' or 'cron'; {CANONICAL_FORMS}")
    return data


Schedule = Annotated[
    Once | Annotated[Interval | Cron, Field(discriminator="mode")] | EmailTrigger | BeforeEvent | WebhookTrigger,
    Field(discriminator="type"),
    BeforeValidator(_reject_legacy),
]
"""A schedule object: `Once`, `Interval`, `Cron`, or a trigger (`toolsets.schedule_triggers`)."""

ScheduleModel = Once | Interval | Cron | TriggerModel

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]


class Reminder(BaseModel):
    """Deliver `text` as it is, without a model call. On a trigger, `text` is a template filled from the
    event (``{from}``, ``{subject}``, ``{title}``, ``{time}``, ``{location}``, ...) and may be left out."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    kind: Literal["reminder"]
    text: _Text | None = None


class Prompt(BaseModel):
    """Run `prompt` as a model turn in the automation's own session and deliver the reply."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    kind: Literal["prompt"]
    prompt: _Text


Action = Annotated[Reminder | Prompt, Field(discriminator="kind")]
"""An action object: `Reminder` or `Prompt`."""

ActionModel = Reminder | Prompt



# What the model is shown for the two objects: one flat object each, rather than the union's full
# JSON schema (several kilobytes per tool). Validation still uses the exact union above.
_SCHEDULE_SCHEMA = {
    "type": "object",
    "description": 'One of {"type": "once", "at": "2026-12-01T09:00:00"}, '
                   '{"type": "every", "mode": "interval", "interval": "30m"} (units w d h m s), '
                   '{"type": "every", "mode": "cron", "cron": "0 9 * * 1-5"} (crontab, local time); '
                   'optional "timezone": IANA name, default the user\'s zone. Triggers fire on events: '
                   '{"type": "email", "account": "personal", "folder": "INBOX", "from": ["*@bank.example"], '
                   '"subject": "statement", "verified_sender": true} for each new matching message (every '
                   'filter optional); {"type": "before_event", "minutes": 10, "account": "work", '
                   '"calendar": "Work"} before each calendar event ("all_day": true includes all-day ones); '
                   '{"type": "webhook", "name": "ci"} for each authenticated POST to /hooks/ci.',
    "properties": {"type": {"enum": ["once", "every", *TRIGGER_TYPES]}, "mode": {"enum": ["interval", "cron"]},
                   "at": {"type": "string"}, "interval": {"type": "string"}, "cron": {"type": "string"},
                   "timezone": {"type": "string"}, "account": {"type": "string"}, "folder": {"type": "string"},
                   "from": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string"},
                   "verified_sender": {"type": "boolean"}, "minutes": {"type": "integer"},
                   "calendar": {"type": "string"}, "all_day": {"type": "boolean"}, "name": {"type": "string"}},
    "required": ["type"],
}
_ACTION_SCHEMA = {
    "type": "object",
    "description": '{"kind": "reminder", "text": "..."} sends the text as it is; '
                   '{"kind": "prompt", "prompt": "..."} runs the prompt as a model turn and sends the reply. '
                   'On a trigger, {"kind": "reminder"} sends a line from the event (e.g. "📧 {from}: {subject}", '
                   '"📅 {title} at {time} in {location}") with no model call; the text may set that template. '
                   'A prompt on a trigger sees the event as outside content.',
    "properties": {"kind": {"enum": ["reminder", "prompt"]}, "text": {"type": "string"}, "prompt": {"type": "string"}},
    "required": ["kind"],
}


class ScheduleSpec(RootModel[Annotated[Schedule, WithJsonSchema(_SCHEDULE_SCHEMA)]]):
    """A schedule object as a tool argument (a named type keeps its discriminators and legacy check)."""

    model_config = ConfigDict(defer_build=True)


class ActionSpec(RootModel[Annotated[Action, WithJsonSchema(_ACTION_SCHEMA)]]):
    """An action object as a tool argument."""

    model_config = ConfigDict(defer_build=True)


@cache
def _schedule_adapter() -> TypeAdapter[ScheduleModel]:
    return TypeAdapter(Schedule)


@cache
def _action_adapter() -> TypeAdapter[ActionModel]:
    return TypeAdapter(Action)


def parse_schedule(data: Any) -> ScheduleModel:
    """Validate a schedule object (a dict as stored or sent by a model)."""
    return _schedule_adapter().validate_python(data)


def parse_action(data: Any) -> ActionModel:
    """Validate an action object."""
    return _action_adapter().validate_python(data)


def check_pair(schedule: ScheduleModel, action: ActionModel) -> None:
    """Refuse an action that cannot go with the schedule: a reminder without text needs a trigger."""
    if isinstance(action, Reminder) and action.text is None and not schedule.event_driven:
        raise ScheduleError('a reminder needs its "text" (only a trigger\'s reminder has a default line)')


def reminder_template(schedule: ScheduleModel, action: Reminder) -> str:
    """The line a trigger's reminder fills from each event."""
    return action.text or DEFAULT_LINES.get(schedule.type, "{summary}")


def describe(schedule: ScheduleModel, default_tz: ZoneInfo) -> str:
    """A short human description: "once", "every 30m", "cron 0 9 * * 1-5 (Europe/Berlin)",
    "email INBOX from *@bank.example", "10 min before events", "webhook /hooks/ci"."""
    if isinstance(schedule, EmailTrigger | BeforeEvent | WebhookTrigger):
        return describe_trigger(schedule)
    if isinstance(schedule, Once):
        return "once"
    if isinstance(schedule, Interval):
        return f"every {schedule.interval}"
    return f"cron {schedule.cron} ({schedule.zone(default_tz).key})"


def when_label(at: datetime, tz: ZoneInfo, now: datetime) -> str:
    """Local time of instant `at` for a person, with its zone: "09:00 CET" on the day of `now`, else
    "Tue 1 Dec 09:00 CET" (with the year when it is not the year of `now`). A zone without an
    abbreviation shows its offset: "09:00 UTC+04"."""
    local, today = at.astimezone(tz), now.astimezone(tz)
    zone = local.strftime("%Z")
    zone = f"UTC{zone}" if zone[:1] in "+-" else zone
    if local.date() == today.date():
        return f"{local:%H:%M} {zone}"
    year = f" {local.year}" if local.year != today.year else ""
    return f"{local:%a} {local.day} {local:%b}{year} {local:%H:%M} {zone}"
