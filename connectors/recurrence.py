"""What expanding a recurring event will cost, and how to keep it bounded.

`recurring_ical_events` (through dateutil) walks a rule from its DTSTART to the end of the window,
caching every step, and builds one component copy per occurrence: a `FREQ=SECONDLY` invite that began
a month ago took ~23 s and +170 MB to list one hour, on the caller's thread, with no way to stop it.
So, before expanding a series:

1. A rule without BY-parts or COUNT has occurrences on a fixed lattice (DTSTART + n * INTERVAL * FREQ,
   wall-clock), so its DTSTART is moved forward, along the lattice, to just before the window: the
   same occurrences, a few steps instead of millions.
2. Otherwise the steps from DTSTART to the window's end are estimated (periods times the candidates
   the BY-parts add per period); past STEP_BUDGET the series is not expanded and the caller says so.
3. Within the window at most MAX_OCCURRENCES occurrences per series are built: the window is cut short
   for that series, and the caller says where the listing stops.

The estimate errs high, so an unusual but cheap rule may be reported as too costly; never the reverse
for the rule shapes RFC 5545 allows. The caller also runs expansion off the event loop with a timeout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only in annotations: the components come from `connectors.ical`, which imports it
    import icalendar

MAX_OCCURRENCES = 200  # per series per query
STEP_BUDGET = 200_000  # rule steps one series may take in one query (dateutil: a few µs each)

_SECONDS = {"SECONDLY": 1, "MINUTELY": 60, "HOURLY": 3600, "DAILY": 86400, "WEEKLY": 604800,
            "MONTHLY": 2_629_746, "YEARLY": 31_556_952}
_LATTICE = ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY")  # periods of one fixed wall-clock length
# The unit of each BY-part: within a longer period it adds candidates (an expansion), within a period
# of its own length or shorter it only filters.
_BY_UNIT = {"BYSECOND": 1, "BYMINUTE": 60, "BYHOUR": 3600, "BYDAY": 86400, "BYMONTHDAY": 86400,
            "BYYEARDAY": 86400, "BYWEEKNO": 604800, "BYMONTH": 2_629_746}
_BY_PARTS = (*_BY_UNIT, "BYSETPOS")


@dataclass(frozen=True)
class Bound:
    """How far to expand one series: `stop` is where its listing ends, before the window's end when it
    would exceed MAX_OCCURRENCES; `expandable` is False when even reaching the window costs too much."""

    stop: datetime
    expandable: bool = True


def bound(comp: icalendar.Event, start: datetime, end: datetime) -> Bound | None:
    """Bound the expansion of the series `comp` over [start, end); None when it needs no bound.

    May move `comp`'s DTSTART (and DTEND) forward along its lattice: only ever on a parsed copy.
    """
    rule = _first(comp.get("rrule"))
    if rule is None:
        return None
    freq = str(_first(rule.get("FREQ")) or "").upper()
    if freq not in _SECONDS:
        return None  # the library reports a malformed rule
    interval = max(1, int(_first(rule.get("INTERVAL")) or 1))
    period = timedelta(seconds=_SECONDS[freq] * interval)
    by = {part: rule[part] for part in _BY_PARTS if part in rule}
    count = _first(rule.get("COUNT"))
    first = comp.start
    length = _clock(comp.end, first) - _clock(first, first)
    if not by and count is None and freq in _LATTICE and (isinstance(first, datetime) or freq in ("DAILY", "WEEKLY")):
        steps_before = (_clock(start, first) - _clock(first, first) - length) // period - 1
        if steps_before > 0:
            _shift(comp, steps_before * period)
            first = comp.start
    candidates = _candidates(freq, by)
    last = _clock(end, first)
    until = _first(rule.get("UNTIL"))
    if until is not None:
        last = min(last, _clock(until, first))
    steps = max(0, (last - _clock(first, first)) // period) + 1
    cost = min(steps, int(count)) if count is not None and not by else steps * candidates
    if cost > STEP_BUDGET:
        return Bound(stop=end, expandable=False)
    in_window = ((end - start) // period + 1) * candidates
    if in_window <= MAX_OCCURRENCES:
        return None
    stop = start + period * math.ceil((MAX_OCCURRENCES + 1) / candidates)
    return Bound(stop=min(stop, end)) if stop < end else None


def _candidates(freq: str, by: dict[str, Any]) -> int:
    """Candidate instants per period, over-estimated: the product of the expanding BY-parts."""
    size = _SECONDS[freq]
    n = 1
    for part, unit in _BY_UNIT.items():
        if part in by and unit < size:
            values = len(by[part])
            if part == "BYDAY" and freq in ("MONTHLY", "YEARLY"):
                values *= 5 if freq == "MONTHLY" else 53  # each weekday recurs in a month or a year
            if part == "BYMONTHDAY" and freq == "YEARLY":
                values *= 12
            n *= values
    return n


def _clock(value: date | datetime, like: date | datetime) -> Any:
    """`value` on the series' own clock: a date for all-day series, else a naive wall-clock time in the
    series' zone (floating series read the window in its own zone)."""
    if not isinstance(like, datetime):
        return value.date() if isinstance(value, datetime) else value
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day)
    if value.tzinfo is not None and like.tzinfo is not None:
        value = value.astimezone(like.tzinfo)
    return value.replace(tzinfo=None)


def _shift(comp: icalendar.Event, delta: timedelta) -> None:
    """Move DTSTART and DTEND by `delta` of wall-clock time (aware + timedelta keeps the wall clock).
    The value is changed in place, so the property keeps its parameters. A ValueError when either is not
    a single date or date-time (`comp.start` and `comp.end`, read before, already refuse most such)."""
    from icalendar import vDDDTypes

    for name in ("DTSTART", "DTEND"):
        if name not in comp:
            continue
        prop = comp[name]
        if not isinstance(prop, vDDDTypes) or not isinstance(prop.dt, date):
            raise ValueError(f"{name} is not a date or date-time: {prop!r}")
        prop.dt = prop.dt + delta


def _first(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if value else None
    return value
