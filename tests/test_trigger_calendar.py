"""before_event triggers against a real CalDAV server (Radicale): an event fires its trigger `minutes`
before it starts; a moved one at its new time, a cancelled one never; once per occurrence across re-plans
and restarts; times in the owner's zone through a DST change."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from store.records import Origin, iso
from toolsets.registry import TOOLSETS
from toolsets.schedule import Reminder, parse_schedule

OWNER = "console:owner"
CONSOLE = Origin(surface="console", chat_id="local")


def ics(uid: str, summary: str, start: datetime, *, location: str = "", rrule: str = "",
        zone: str | None = None, status: str = "", cancelled_instance: datetime | None = None) -> str:
    """One event; `cancelled_instance` (a start of the series) adds an override marking it STATUS:CANCELLED."""
    def when(name: str, at: datetime) -> str:
        return f"{name};TZID={zone}:{at:%Y%m%dT%H%M%S}" if zone else f"{name}:{at.astimezone(UTC):%Y%m%dT%H%M%SZ}"

    stamp, end_stamp = when("DTSTART", start), when("DTEND", start + timedelta(minutes=30))
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN", "BEGIN:VEVENT", f"UID:{uid}",
             "DTSTAMP:20260101T000000Z", stamp, end_stamp, f"SUMMARY:{summary}",
             *([f"LOCATION:{location}"] if location else []), *([f"RRULE:{rrule}"] if rrule else []),
             *([f"STATUS:{status}"] if status else []), "END:VEVENT"]
    if cancelled_instance is not None:
        lines += ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20260101T000000Z",
                  when("RECURRENCE-ID", cancelled_instance), when("DTSTART", cancelled_instance),
                  when("DTEND", cancelled_instance + timedelta(minutes=30)), f"SUMMARY:{summary}",
                  "STATUS:CANCELLED", "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines) + "\r\n"


@pytest.fixture
def calendar(caldav_server: Any) -> str:
    return caldav_server.make_calendar(f"Work {uuid.uuid4().hex[:6]}", seed=False)


@pytest.fixture
def start(start_console: Any, make_config: Any, caldav_server: Any, calendar: str,
          monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANYY_TEST_CALENDAR_PASSWORD", caldav_server.password)
    config = make_config(runtime={"timezone": "Europe/Berlin"},
                         calendar={"url": calendar, "username": caldav_server.username,
                                   "password_env": "ANYY_TEST_CALENDAR_PASSWORD", "timeout_s": 5})

    async def go() -> Any:
        return await start_console(config=config, toolsets=TOOLSETS)

    return go


def put(caldav_server: Any, calendar: str, uid: str, body: str) -> None:
    with caldav_server.http() as http:
        http.put(f"{calendar}{uid}.ics", content=body, headers={"Content-Type": "text/calendar"}).raise_for_status()


def delete(caldav_server: Any, calendar: str, uid: str) -> None:
    with caldav_server.http() as http:
        http.delete(f"{calendar}{uid}.ics").raise_for_status()


async def trigger(h: Any, minutes: int) -> str:
    rec = await h.gw.services["automations"].create(OWNER, CONSOLE, "before meetings",
                                                    parse_schedule({"type": "before_event", "minutes": minutes}),
                                                    Reminder(kind="reminder"))
    return str(rec.id)


async def test_a_moved_event_fires_at_its_new_time_once_and_a_cancelled_one_never(
        start: Any, caldav_server: Any, calendar: str, model: Any) -> None:
    h = await start()
    planner = h.gw.triggers.calendar
    automation = await trigger(h, 10)
    now = datetime.now(UTC)
    put(caldav_server, calendar, "standup", ics("standup", "Standup", now + timedelta(minutes=11), location="Room 4"))
    put(caldav_server, calendar, "retro", ics("retro", "Retro", now + timedelta(minutes=10, seconds=4)))
    await planner.check()
    assert sorted(e.fields["title"] for _, e in planner.planned.values()) == ["Retro", "Standup"]
    listed = planner.listings
    await planner.check()  # nothing changed: the calendar's getctag says so, and nothing is listed
    assert planner.listings == listed and len(planner.planned) == 2

    delete(caldav_server, calendar, "retro")  # cancelled
    moved = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10, seconds=2)
    put(caldav_server, calendar, "standup", ics("standup", "Standup", moved, location="Room 4"))  # moved earlier
    await planner.check()
    assert planner.listings == listed + 1
    assert [(at, e.fields["title"]) for at, e in planner.planned.values()] == [
        (iso(moved - timedelta(minutes=10)), "Standup")]
    local = moved.astimezone(h.gw.config.tz)
    out = await h.wait_for(f"📅 Standup at {local:%H:%M}")
    assert "in Room 4" in out
    await planner.check()  # re-planning after the firing fires nothing more
    await asyncio.sleep(3)  # past the cancelled event's old firing time
    await h.gw.idle()
    out += h.new_output()
    assert out.count("📅") == 1 and "Retro" not in out
    assert model.requests == []
    [run] = await h.gw.services["automations"].history(OWNER, automation)
    assert run.status == "delivered"

    await h.gw.stop()  # a restart re-plans the occurrence (it has not started): claimed already
    h = await start()
    await h.gw.triggers.calendar.check()
    await h.gw.idle()
    await asyncio.sleep(0.5)
    assert "📅" not in h.new_output()
    assert len(await h.gw.services["automations"].history(OWNER, automation)) == 1


async def test_occurrences_are_planned_in_instants_through_a_dst_change(
        start: Any, caldav_server: Any, calendar: str) -> None:
    h = await start()
    automation = await trigger(h, 10)
    [(rec, schedule)] = [(r, parse_schedule(r.schedule)) for r in await h.gw.services["automations"].list(OWNER)
                         if r.id == automation]
    # Daily at 09:00 Berlin from Friday 27 March 2026; clocks go forward on Sunday the 29th at 02:00.
    put(caldav_server, calendar, "daily", ics("daily", "Daily", datetime(2026, 3, 27, 9, 0), rrule="FREQ=DAILY",
                                              zone="Europe/Berlin"))
    put(caldav_server, calendar, "holiday", "\r\n".join([
        "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN", "BEGIN:VEVENT", "UID:holiday",
        "DTSTAMP:20260101T000000Z", "DTSTART;VALUE=DATE:20260329", "DTEND;VALUE=DATE:20260330",
        "SUMMARY:Holiday", "END:VEVENT", "END:VCALENDAR"]) + "\r\n")
    seen_at = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # Saturday noon: today's has started
    planned = await h.gw.triggers.calendar.occurrences(rec, schedule, seen_at)
    # Within the 36 h ahead: Sunday's, at 09:00 CEST = 07:00 UTC (Friday's 09:00 CET was 08:00 UTC).
    assert [(at, e.fields["time"]) for _, at, e in planned] == [
        (iso(datetime(2026, 3, 29, 6, 50, tzinfo=UTC)), "Sun 29 Mar 09:00 CEST")]
    assert all(e.fields["title"] == "Daily" for _, _, e in planned)  # the all-day holiday is left out


async def test_events_and_occurrences_kept_as_cancelled_are_not_planned(
        start: Any, caldav_server: Any, calendar: str) -> None:
    """An attendee's copy of a called-off meeting stays in the calendar with STATUS:CANCELLED, and so does
    one cancelled occurrence of a series (an override): neither fires."""
    h = await start()
    automation = await trigger(h, 10)
    [(rec, schedule)] = [(r, parse_schedule(r.schedule)) for r in await h.gw.services["automations"].list(OWNER)
                         if r.id == automation]
    first = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    put(caldav_server, calendar, "called-off", ics("called-off", "Called off", first + timedelta(hours=2),
                                                   status="CANCELLED"))
    put(caldav_server, calendar, "kept", ics("kept", "Kept", first + timedelta(hours=3), status="CONFIRMED"))
    put(caldav_server, calendar, "series", ics("series", "Series", first, rrule="FREQ=HOURLY;INTERVAL=6;COUNT=3",
                                               cancelled_instance=first + timedelta(hours=6)))
    planned = await h.gw.triggers.calendar.occurrences(rec, schedule, first - timedelta(hours=1))
    assert [(at, e.fields["title"]) for _, at, e in planned] == [
        (iso(first - timedelta(minutes=10)), "Series"), (iso(first + timedelta(hours=3, minutes=-10)), "Kept"),
        (iso(first + timedelta(hours=12, minutes=-10)), "Series")]
