"""RFC 5545 rules <-> Microsoft Graph's `patternedRecurrence`, for the rules both can say.

The calendar toolset speaks RRULE ("FREQ=WEEKLY;BYDAY=MO,WE"); Graph stores a pattern (daily, weekly,
absolute/relative monthly or yearly) and a range (end date, count, or none). Rules Graph cannot hold
(BYHOUR, BYSETPOS lists, several monthly days, ...) are refused with a clear `InvalidEvent` rather than
stored as something else.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from connectors.ical import EventTime, InvalidEvent

_DAYS = {"MO": "monday", "TU": "tuesday", "WE": "wednesday", "TH": "thursday", "FR": "friday", "SA": "saturday",
         "SU": "sunday"}
_NAMES = {v: k for k, v in _DAYS.items()}
_INDEX = {"1": "first", "2": "second", "3": "third", "4": "fourth", "-1": "last"}
_NUMBER = {v: k for k, v in _INDEX.items()}
_KNOWN = {"FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY", "BYMONTH", "COUNT", "UNTIL", "WKST"}


def _parts(rule: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    for piece in rule.removeprefix("RRULE:").split(";"):
        key, sep, value = piece.partition("=")
        if not sep or not value:
            raise InvalidEvent(f"the repeat rule {rule!r} is not NAME=VALUE;... (e.g. FREQ=WEEKLY;BYDAY=MO)")
        parts[key.strip().upper()] = value.strip().upper()
    return parts


def to_graph(rule: str, start: EventTime, zone: str) -> dict[str, Any]:
    """The `recurrence` of a Graph event starting at `start` (in time zone `zone`) that repeats by `rule`."""
    parts = _parts(rule)
    if unknown := set(parts) - _KNOWN:
        raise InvalidEvent(f"Microsoft calendars cannot repeat by {', '.join(sorted(unknown))}; use FREQ, INTERVAL, "
                           "BYDAY, BYMONTHDAY, BYMONTH, COUNT or UNTIL")
    freq = parts.get("FREQ", "")
    first = start.date() if isinstance(start, datetime) else start
    pattern: dict[str, Any] = {"interval": int(parts.get("INTERVAL", "1"))}
    days = [d for d in parts.get("BYDAY", "").split(",") if d]
    plain = [d for d in days if d in _DAYS]
    if freq == "DAILY" and not days:
        pattern["type"] = "daily"
    elif freq == "WEEKLY":
        pattern |= {"type": "weekly", "daysOfWeek": [_DAYS[d] for d in plain] or [first.strftime("%A").lower()],
                    "firstDayOfWeek": _DAYS.get(parts.get("WKST", "MO"), "monday")}
        if len(plain) != len(days):
            raise InvalidEvent(f"a weekly repeat takes plain days (BYDAY=MO,WE), not {parts['BYDAY']}")
    elif freq in ("MONTHLY", "YEARLY") and len(days) == 1 and days[0][:-2] in _INDEX:
        kind = "relativeMonthly" if freq == "MONTHLY" else "relativeYearly"
        pattern |= {"type": kind, "daysOfWeek": [_DAYS[days[0][-2:]]], "index": _INDEX[days[0][:-2]]}
    elif freq in ("MONTHLY", "YEARLY") and not days and "," not in parts.get("BYMONTHDAY", ""):
        kind = "absoluteMonthly" if freq == "MONTHLY" else "absoluteYearly"
        pattern |= {"type": kind, "dayOfMonth": int(parts.get("BYMONTHDAY", first.day))}
    else:
        raise InvalidEvent(f"Microsoft calendars cannot hold the repeat rule {rule!r}; use a daily, weekly, "
                           "monthly (a day of the month, or e.g. BYDAY=2TU) or yearly rule")
    if freq == "YEARLY":
        pattern["month"] = int(parts.get("BYMONTH", first.month))
    span: dict[str, Any] = {"startDate": first.isoformat(), "recurrenceTimeZone": zone}
    if "COUNT" in parts:
        span |= {"type": "numbered", "numberOfOccurrences": int(parts["COUNT"])}
    elif "UNTIL" in parts:
        until = parts["UNTIL"]
        span |= {"type": "endDate", "endDate": f"{until[:4]}-{until[4:6]}-{until[6:8]}"}
    else:
        span["type"] = "noEnd"
    return {"pattern": pattern, "range": span}


def from_graph(recurrence: dict[str, Any] | None) -> str:
    """The RFC 5545 rule of a Graph `recurrence` ("" for none, or for a pattern this module cannot say)."""
    if not recurrence:
        return ""
    pattern, span = recurrence.get("pattern") or {}, recurrence.get("range") or {}
    kind = pattern.get("type", "")
    freq = {"daily": "DAILY", "weekly": "WEEKLY", "absoluteMonthly": "MONTHLY", "relativeMonthly": "MONTHLY",
            "absoluteYearly": "YEARLY", "relativeYearly": "YEARLY"}.get(kind)
    if freq is None:
        return ""
    parts = [f"FREQ={freq}"]
    if int(pattern.get("interval") or 1) > 1:
        parts.append(f"INTERVAL={pattern['interval']}")
    days = [_NAMES[d] for d in pattern.get("daysOfWeek") or [] if d in _NAMES]
    if kind == "weekly" and days:
        parts.append("BYDAY=" + ",".join(days))
    elif kind.startswith("relative") and days:
        parts.append("BYDAY=" + ",".join(_NUMBER.get(pattern.get("index", "first"), "1") + d for d in days))
    elif kind.startswith("absolute") and pattern.get("dayOfMonth"):
        parts.append(f"BYMONTHDAY={pattern['dayOfMonth']}")
    if kind.endswith("Yearly") and pattern.get("month"):
        parts.append(f"BYMONTH={pattern['month']}")
    if span.get("type") == "numbered" and span.get("numberOfOccurrences"):
        parts.append(f"COUNT={span['numberOfOccurrences']}")
    elif span.get("type") == "endDate" and span.get("endDate"):
        # Graph's end date is inclusive; an RFC 5545 UNTIL at that day's end says the same.
        parts.append(f"UNTIL={date.fromisoformat(span['endDate']):%Y%m%d}T235959Z")
    return ";".join(parts)
