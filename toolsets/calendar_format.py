"""How the calendar toolset reads the times the model writes and shows events to the model and owner.

Pure functions of events, values and the owner's zone: no tool context, no connector calls, so the
toolset module (`toolsets.calendar`) keeps only the tools, their previews and their effects.

Every time shown is in the owner's zone; all-day events are dates. Times the model gives without a zone
are read in the owner's zone and written with that zone's TZID, so a weekly meeting stays at its hour
across DST changes.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from toolsets.limits import TITLE_CHARS, Title

if TYPE_CHECKING:  # the [calendar] service's (`toolsets.calendar` says why): imported where it is used
    from connectors.calendar import Event, EventFields, EventTime

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_when(value: Any) -> date | datetime:
    """A date for 'YYYY-MM-DD', a datetime for an ISO moment; anything else is a ValueError."""
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text) if _DAY.fullmatch(text) else datetime.fromisoformat(text)
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a day (YYYY-MM-DD) or a moment (YYYY-MM-DDTHH:MM)")


if TYPE_CHECKING:
    When = date | datetime
else:
    class When:
        """A day ('YYYY-MM-DD', all-day) or a moment ('YYYY-MM-DDTHH:MM'), validated to a date or datetime.

        A custom type rather than pydantic's date/datetime union, which reads a bare day as midnight or
        midnight as a bare day depending on the input mode (and the runtime validates in both); not an
        `Annotated` validator, because tool signatures are read without their Annotated metadata.
        """

        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
            return core_schema.no_info_plain_validator_function(parse_when)

        @classmethod
        def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
            return {"type": "string"}  # the tools say the two forms; a union costs bytes in every request


# An optional day or moment, shown to the model as a plain string (not the anyOf with null pydantic writes
# for `When | None`), validated as `When` or None.
OptWhen = Annotated[When | None, WithJsonSchema({"type": "string"})]
OptTitle = Annotated[Title | None, WithJsonSchema({"type": "string", "maxLength": TITLE_CHARS})]


# -- showing events ---------------------------------------------------------------------------------

def in_zone(value: EventTime, tz: ZoneInfo) -> EventTime:
    """Dates stay dates; floating times are the owner's; aware times move to the owner's zone."""
    if not isinstance(value, datetime):
        return value
    return value.replace(tzinfo=tz) if value.tzinfo is None else value.astimezone(tz)


def day_text(d: date) -> str:
    """A day as a person reads it: 'Tue 01 Dec 2026'."""
    return f"{d:%a %d %b %Y}"


def when_text(event: Event, tz: ZoneInfo) -> str:
    """When the event happens, in the owner's zone (the zone named at each end where they differ)."""
    if event.all_day:
        last = max(event.start, event.end - timedelta(days=1))  # iCalendar's end day is exclusive
        span = day_text(event.start) if last == event.start else f"{day_text(event.start)} – {day_text(last)}"
        return f"{span} (all day)"
    s, e = in_zone(event.start, tz), in_zone(event.end, tz)
    assert isinstance(s, datetime) and isinstance(e, datetime)
    if s.date() != e.date():
        return f"{day_text(s)} {s:%H:%M} {s.tzname()} – {day_text(e)} {e:%H:%M} {e.tzname()}"
    if s.tzname() != e.tzname():
        return f"{day_text(s)} {s:%H:%M} {s.tzname()}–{e:%H:%M} {e.tzname()}"
    return f"{day_text(s)} {s:%H:%M}–{e:%H:%M} {s.tzname()}"


def _rows(event: Event, tz: ZoneInfo) -> dict[str, str]:
    """The fields a person checks, in the order they check them."""
    return {"title": event.summary, "when": when_text(event, tz), "location": event.location,
            "attendees": ", ".join(event.attendees), "repeats": event.rrule, "notes": event.description,
            "calendar": event.calendar}


def event_card(event: Event, tz: ZoneInfo) -> str:
    """The event's non-empty fields, one indented line each."""
    return "\n".join(f"  {k}: {v}" for k, v in _rows(event, tz).items() if v)


def event_ref(event: Event) -> str:
    """The id and version the model quotes to read, change or cancel the event."""
    return f"id={event.uid} version={event.version}"


def event_line(event: Event, tz: ZoneInfo) -> str:
    """The event as one line of a listing."""
    where = f" @ {event.location}" if event.location else ""
    repeats = " (repeats)" if event.rrule else ""
    return f"- {when_text(event, tz)}  {event.summary}{where}{repeats} [{event.calendar}] {event_ref(event)}"


def event_diff(before: Event, after: Event, tz: ZoneInfo) -> list[str]:
    """One 'field: before -> after' line per field that differs; empty when nothing would change."""
    old, new = _rows(before, tz), _rows(after, tz)
    return [f"  {k}: {old[k] or '(none)'} -> {new[k] or '(none)'}" for k in old if old[k] != new[k]]


def change_text(before: Event, after: Event, tz: ZoneInfo, account: str = "") -> str:
    """A change to an event as the owner reviews it: which event (`account` naming its account), then its
    diff."""
    return "\n".join([f"Change \"{before.summary}\" ({when_text(before, tz)}) in {before.calendar}{account}:",
                      *event_diff(before, after, tz)])


# -- reading what the model asked for ---------------------------------------------------------------

def range_bound(value: date | datetime, tz: ZoneInfo, *, end: bool = False) -> datetime:
    """A range bound: a day starts at its midnight (an end day is included whole)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=tz) if value.tzinfo is None else value
    return datetime.combine(value + timedelta(days=1) if end else value, datetime.min.time(), tz)


def event_fields(tz: ZoneInfo, *, title: str | None = None, start: date | datetime | None = None,
                 end: date | datetime | None = None, location: str | None = None, description: str | None = None,
                 attendees: list[str] | None = None, repeat: str | None = None) -> EventFields:
    """The event fields the model's arguments name (None: unchanged), times in the owner's zone."""
    # Times are written in the owner's zone, so the event carries a real TZID rather than an offset.
    # A person's last day is included; iCalendar's end day is not.
    from connectors.calendar import EventFields

    if end is not None and not isinstance(end, datetime):
        end += timedelta(days=1)
    return EventFields(
        summary=title.strip() if title is not None else None,
        start=in_zone(start, tz) if start is not None else None,
        end=in_zone(end, tz) if end is not None else None,
        location=location, description=description,
        attendees=tuple(attendees) if attendees is not None else None, rrule=repeat,
    )
