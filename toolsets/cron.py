"""Five-field crontab expressions with standard crontab meaning, evaluated on local wall-clock time.

Why not APScheduler's `CronTrigger.from_crontab`: in the 3.x series it numbers weekdays from Monday
(so the usual ``1-5`` would mean Tuesday to Saturday), it ANDs the two day fields where crontab ORs
them, and its handling of local times that do not exist or exist twice is not ours to state. This
module only answers "which wall-clock minute comes next"; `toolsets.schedule` maps wall time to
instants with the documented DST policy.

Syntax per field: ``*``, ``N``, ``A-B``, any of those followed by ``/STEP``, and comma-separated lists;
month and weekday names (``jan``, ``mon``) are accepted, weekday 0 and 7 are both Sunday. When both the
day-of-month and day-of-week fields are restricted (not ``*``), a day matches if either does.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_WEEKDAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
# (name, lowest, highest, names) for minute, hour, day of month, month, day of week (7 folds to 0).
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _WEEKDAYS),
)
# The longest gap between two matches of a satisfiable expression is 29 February skipping a
# non-leap century year (2096 -> 2104); searching a little further than that always finds a match.
_SEARCH_DAYS = 8 * 366 + 2


class CronError(ValueError):
    """The expression is not a valid five-field crontab."""


@dataclass(frozen=True)
class Cron:
    """A parsed crontab: the sets of matching values per field."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_or: bool  # both day fields restricted: either may match

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_dom = day.day in self.days
        by_dow = (day.isoweekday() % 7) in self.weekdays
        return (by_dom or by_dow) if self.day_or else (by_dom and by_dow)

    def next_after(self, wall: datetime) -> datetime | None:
        """The first matching wall-clock minute strictly after naive `wall` (None only past year 9999)."""
        start = (wall + timedelta(minutes=1)).replace(second=0, microsecond=0)
        day = start.date()
        for offset in range(_SEARCH_DAYS):
            if offset:
                try:
                    day += timedelta(days=1)
                except OverflowError:
                    return None
                start = datetime.combine(day, datetime.min.time())
            if not self.matches_day(day):
                continue
            for hour in self.hours:
                if hour < start.hour:
                    continue
                for minute in self.minutes:
                    if hour == start.hour and minute < start.minute:
                        continue
                    return start.replace(hour=hour, minute=minute)
        return None


def parse_cron(text: str) -> Cron:
    """Parse a crontab expression (or an @macro such as ``@daily``); raises CronError saying what is wrong."""
    expr = _MACROS.get(text.strip().lower(), text)
    parts = expr.split()
    if len(parts) != 5:
        raise CronError(f"cron {text!r} has {len(parts)} fields; "
                        "expected 5: minute hour day-of-month month day-of-week")
    values = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(v % 7 for v in values[4])
    cron = Cron(text=text, minutes=tuple(sorted(values[0])), hours=tuple(sorted(values[1])),
                days=frozenset(values[2]), months=frozenset(values[3]), weekdays=weekdays,
                day_or=parts[2] != "*" and parts[4] != "*")
    if not cron.day_or and not any(d <= _longest(m) for m in cron.months for d in cron.days):
        raise CronError(f"cron {text!r} never matches: no chosen month has the chosen day")
    return cron


def _longest(month: int) -> int:
    return 29 if month == 2 else calendar.monthrange(2001, month)[1]


def _field(part: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in part.split(","):
        body, _, step_text = item.partition("/")
        step = _number(step_text, name, names={}) if step_text else 1
        if step < 1:
            raise CronError(f"cron {name} step must be at least 1, got {item!r}")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = _number(a, name, names), _number(b, name, names)
        else:
            first = _number(body, name, names)
            last = high if step_text else first  # "5/15" means 5, 20, 35, 50
        if not (low <= first <= high and low <= last <= high) or first > last:
            raise CronError(f"cron {name} {item!r} is out of range {low}-{high}")
        out.update(range(first, last + 1, step))
    return out


def _number(text: str, name: str, names: dict[str, int]) -> int:
    key = text.strip().lower()
    if key in names:
        return names[key]
    if not key.isdigit():
        raise CronError(f"cron {name} has an invalid value {text!r}")
    return int(key)
