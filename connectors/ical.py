"""iCalendar text <-> `Event`, with `icalendar` for the format and `recurring_ical_events` for expansion.

Reading keeps what a person cares about (title, times, place, notes, attendees, repetition); writing a
change edits the stored VEVENT in place, so alarms, categories, exceptions and vendor properties the
model never saw survive an update. Times keep their zone: a DATE value is an all-day event, an aware
datetime is written with its TZID (and the VTIMEZONE the format requires), so recurrences stay on the
same wall-clock time across DST changes.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from connectors import recurrence
from connectors.caldav import CalendarError

# icalendar and recurring_ical_events are imported by the functions that read or write iCalendar text:
# `Event` and `EventFields` are what the calendar toolset names, and they need neither.
if TYPE_CHECKING:
    import icalendar
    from icalendar import vRecur

EventTime = date | datetime
"""A `date` is an all-day value; a `datetime` is aware (TZID or UTC) or, rarely, floating (naive)."""


class InvalidEvent(CalendarError):
    """The event asked for makes no sense (end before start, a malformed rule or address)."""


@dataclass(frozen=True)
class Event:
    """One event, or one occurrence of a recurring event, as read from (or about to be written to) a
    calendar. `end` is exclusive, as in iCalendar: an all-day event on 21 March ends on 22 March."""

    uid: str
    summary: str
    start: EventTime
    end: EventTime
    location: str = ""
    description: str = ""
    attendees: tuple[str, ...] = ()
    rrule: str = ""
    href: str = ""
    etag: str = ""
    calendar: str = ""
    source: str = field(default="", repr=False, compare=False)  # the whole resource, for updates
    # STATUS:CANCELLED (or Graph's isCancelled): an attendee's copy of a called-off meeting, or one
    # cancelled occurrence of a series, usually stays in the calendar marked so.
    cancelled: bool = False

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, datetime)

    @property
    def version(self) -> str:
        """A short, stable token of the ETag: what a person (or a model) quotes to say "this version"."""
        return hashlib.sha256(self.etag.encode()).hexdigest()[:12] if self.etag else ""


@dataclass(frozen=True)
class EventFields:
    """Fields to write. None leaves a field as it is; "" (or an empty tuple) clears it.

    When only `start` moves, the event keeps its duration; a new event without `end` lasts one hour
    (one day when all-day). `rrule` is an RFC 5545 rule such as "FREQ=WEEKLY;BYDAY=MO".
    """

    summary: str | None = None
    start: EventTime | None = None
    end: EventTime | None = None
    location: str | None = None
    description: str | None = None
    attendees: tuple[str, ...] | None = None
    rrule: str | None = None


def parse_event(data: str, uid: str | None = None, *, href: str = "", etag: str = "",
                calendar: str = "") -> Event:
    """The master event (the rule itself, not an exception) of one calendar resource."""
    return _event(_master(_calendar(data, href), uid, href), href=href, etag=etag, calendar=calendar,
                  source=data)


@dataclass(frozen=True)
class Expansion:
    """The occurrences of one resource in a window, and what a reader must be told about them."""

    events: list[Event]
    notes: list[str] = field(default_factory=list)  # a series cut short, or not expanded at all


def expand(data: str, start: datetime, end: datetime, *, href: str = "", etag: str = "",
           calendar: str = "") -> Expansion:
    """Every occurrence of the resource's events that overlaps [start, end), bounded as
    `connectors.recurrence` explains; an occurrence of a series carries the series' rule."""
    import recurring_ical_events

    cal = _calendar(data, href)
    masters = [c for c in cal.events if "recurrence-id" not in c]  # `events` is walk("VEVENT"), typed
    rules = {str(c.get("uid", "")): _rule_text(c) for c in masters}
    try:
        stop, notes = _bounded(masters, start, end)
        occurrences = recurring_ical_events.of(cal).between(start, stop) if stop is not None else []
    except ValueError as exc:  # icalendar's IncompleteComponent (no DTSTART) is one too
        raise CalendarError(f"cannot expand the recurring event at {href or 'the resource'}: {exc}") from None
    events = (_event(c, href=href, etag=etag, calendar=calendar) for c in occurrences)
    return Expansion(events=[replace(e, rrule=e.rrule or rules.get(e.uid, "")) for e in events], notes=notes)


def _bounded(masters: list[icalendar.Event], start: datetime, end: datetime) -> tuple[datetime | None, list[str]]:
    """Where to stop expanding the resource (None: not at all), and the notes saying why."""
    stop, notes = end, []
    for comp in masters:
        limit = recurrence.bound(comp, start, end)
        if limit is None:
            continue
        name = f"{str(comp.get('summary', ''))!r} (id {comp.get('uid', '')!s}, repeats {_rule_text(comp)})"
        if not limit.expandable:
            notes.append(f"{name} was not expanded: it repeats too often since {comp.start.isoformat()} to list "
                         "here; calendar_get shows it, or list a range nearer its start")
            return None, notes
        stop = min(stop, limit.stop)
        notes.append(f"{name} repeats more than {recurrence.MAX_OCCURRENCES} times in this range: only its "
                     f"occurrences before {limit.stop.isoformat()} are listed")
    return stop, notes


def new_event(fields: EventFields, uid: str | None = None) -> Event:
    """A new event (with its iCalendar text in `source`), not yet stored anywhere; `uid` names an event
    another calendar (Microsoft Graph) already holds, which this text then stands for."""
    if not fields.summary or fields.start is None:
        raise InvalidEvent("a new event needs a title and a start")
    import icalendar

    cal = icalendar.Calendar()
    cal.add("prodid", "-//Anyy//Calendar connector//EN")
    cal.add("version", "2.0")
    comp = icalendar.Event()
    comp.add("uid", uid or str(uuid.uuid4()))
    comp.add("created", datetime.now(UTC))
    _write(comp, fields)
    cal.add_component(comp)
    return _finish(cal, comp)


def apply_changes(event: Event, fields: EventFields) -> Event:
    """`event` (read with its source) with `fields` applied: the text to PUT is the result's `source`.

    A recurring event changes as a whole series.
    """
    if not event.source:
        raise CalendarError(f"event {event.uid!r} was read without its data; read it again before changing it")
    cal = _calendar(event.source, event.href)
    comp = _master(cal, event.uid, event.href)
    _write(comp, fields)
    sequence = int(comp.pop("sequence", 0))
    comp.add("sequence", sequence + 1)
    return _finish(cal, comp, href=event.href, etag=event.etag, calendar=event.calendar)


def _finish(cal: icalendar.Calendar, comp: icalendar.Event, *, href: str = "", etag: str = "",
            calendar: str = "") -> Event:
    """Stamp the component, add the VTIMEZONEs its TZIDs need, and read the result back."""
    now = datetime.now(UTC)
    for name in ("dtstamp", "last-modified"):
        comp.pop(name, None)
        comp.add(name, now)
    cal.add_missing_timezones()
    data = cal.to_ical().decode()
    return _event(comp, href=href, etag=etag, calendar=calendar, source=data)


def _calendar(data: str, href: str) -> icalendar.Calendar:
    import icalendar

    try:
        return icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        raise CalendarError(f"the event at {href or 'the resource'} is not valid iCalendar: {exc}") from None


def _master(cal: icalendar.Calendar, uid: str | None, href: str) -> icalendar.Event:
    for comp in cal.events:
        if "recurrence-id" not in comp and (uid is None or str(comp.get("uid", "")) == uid):
            return comp
    raise CalendarError(f"the resource {href or ''} holds no event{f' with id {uid!r}' if uid else ''}")


def _event(comp: icalendar.Event, *, href: str, etag: str, calendar: str, source: str = "") -> Event:
    try:
        start, end = comp.start, comp.end
    except ValueError as exc:
        raise CalendarError(f"the event at {href or 'the resource'} has no usable start: {exc}") from None
    return Event(
        uid=str(comp.get("uid", "")), summary=str(comp.get("summary", "")), start=start, end=end,
        location=str(comp.get("location", "")), description=str(comp.get("description", "")),
        attendees=tuple(_email(a) for a in _as_list(comp.get("attendee"))),
        rrule=_rule_text(comp),
        href=href, etag=etag, calendar=calendar, source=source,
        cancelled=str(comp.get("status", "")).strip().upper() == "CANCELLED",
    )


def _rule_text(comp: icalendar.Event) -> str:
    rules = _as_list(comp.get("rrule"))
    return rules[0].to_ical().decode() if rules else ""


def _write(comp: icalendar.Event, fields: EventFields) -> None:
    if fields.start is not None or fields.end is not None:
        start, end = _span(comp, fields)
        for name in ("dtstart", "dtend", "duration"):
            comp.pop(name, None)
        comp.add("dtstart", _storable(start))
        comp.add("dtend", _storable(end))
    for name, text in (("summary", fields.summary), ("location", fields.location),
                       ("description", fields.description)):
        if text is not None:
            comp.pop(name, None)
            if text:
                comp.add(name, text)
    if fields.attendees is not None:
        _set_attendees(comp, fields.attendees)
    if fields.rrule is not None:
        comp.pop("rrule", None)
        if fields.rrule:
            comp.add("rrule", _rule(fields.rrule))


def _span(comp: icalendar.Event, fields: EventFields) -> tuple[EventTime, EventTime]:
    old_start, old_end = (comp.start, comp.end) if "dtstart" in comp else (None, None)
    start = fields.start if fields.start is not None else old_start
    if start is None:
        raise InvalidEvent("an event needs a start")
    if fields.end is not None:
        end = fields.end
    elif old_start is not None and old_end is not None and _same_kind(start, old_start):
        end = _plus(start, _length(old_start, old_end))  # a moved event keeps its duration
    else:
        end = _plus(start, timedelta(hours=1) if isinstance(start, datetime) else timedelta(days=1))
    if not _same_kind(start, end):
        raise InvalidEvent("start and end must both be dates (all-day) or both be times")
    if isinstance(start, datetime) and isinstance(end, datetime) and (start.tzinfo is None) != (end.tzinfo is None):
        raise InvalidEvent("start and end must both carry a time zone, or neither")
    if _as_utc(end) <= _as_utc(start):
        raise InvalidEvent(f"the end ({end.isoformat()}) must be after the start ({start.isoformat()})")
    return start, end


def _same_kind(a: EventTime, b: EventTime) -> bool:
    return isinstance(a, datetime) == isinstance(b, datetime)


def _as_utc(value: EventTime) -> Any:
    """A value that compares by instant (aware) or by wall clock (dates and floating times)."""
    return value.astimezone(UTC) if isinstance(value, datetime) and value.tzinfo else value


def _length(start: EventTime, end: EventTime) -> timedelta:
    # Subtracting two times of one zone gives the wall-clock difference; an event lasts real time.
    return _as_utc(end) - _as_utc(start)


def _plus(start: EventTime, length: timedelta) -> EventTime:
    if isinstance(start, datetime) and start.tzinfo is not None:
        return (start.astimezone(UTC) + length).astimezone(start.tzinfo)
    return start + length


def _storable(value: EventTime) -> EventTime:
    """Times whose zone has no IANA name (a bare UTC offset) are stored in UTC: a TZID needs a name."""
    if isinstance(value, datetime) and value.tzinfo is not None and not isinstance(value.tzinfo, ZoneInfo):
        return value.astimezone(UTC)
    return value


def _rule(text: str) -> vRecur:
    from icalendar import vRecur

    try:
        rule = vRecur.from_ical(text.strip().removeprefix("RRULE:"))
    except ValueError as exc:
        raise InvalidEvent(f"repeat rule {text!r} is not valid: {exc}") from None
    if "FREQ" not in rule:
        raise InvalidEvent(f"repeat rule {text!r} has no FREQ (write e.g. FREQ=WEEKLY;BYDAY=MO)")
    return rule


def _set_attendees(comp: icalendar.Event, emails: tuple[str, ...]) -> None:
    from icalendar import vCalAddress

    # Keep the existing entries (their names and replies) for people who stay invited.
    existing = {_email(a).casefold(): a for a in _as_list(comp.get("attendee"))}
    comp.pop("attendee", None)
    for email in emails:
        email = email.strip()
        if "@" not in email or any(c.isspace() for c in email):
            raise InvalidEvent(f"attendee {email!r} is not an email address")
        kept = existing.get(email.casefold())
        if kept is not None:
            comp.add("attendee", kept)
        else:
            comp.add("attendee", vCalAddress(f"mailto:{email}"),
                     parameters={"ROLE": "REQ-PARTICIPANT", "PARTSTAT": "NEEDS-ACTION", "RSVP": "TRUE"})


def _email(address: Any) -> str:
    text = str(address)
    return text[len("mailto:"):] if text.lower().startswith("mailto:") else text


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
