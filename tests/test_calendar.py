"""The calendar connector against a real CalDAV server (Radicale, see tests/fixtures/caldav.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
import pytest_asyncio

from connectors.calendar import (
    CalendarAuthError,
    CalendarClient,
    CalendarConflict,
    CalendarNotFound,
    CalendarSettings,
    CalendarUnreachable,
    EventFields,
    InvalidEvent,
)
from tests.fixtures.caldav import CalDAVServer

BERLIN = ZoneInfo("Europe/Berlin")
UTC = UTC
MARCH = (datetime(2025, 3, 1, tzinfo=BERLIN), datetime(2025, 5, 1, tzinfo=BERLIN))


def settings(server: CalDAVServer, url: str | None = None, **kw: object) -> CalendarSettings:
    return CalendarSettings.model_validate(
        {"url": url or server.url, "username": server.username, "password": server.password} | kw)


@pytest_asyncio.fixture(loop_scope="function")
async def scratch(caldav_server: CalDAVServer, fresh_calendar: str) -> AsyncIterator[CalendarClient]:
    """A client whose URL is this test's own calendar."""
    async with CalendarClient(settings(caldav_server, fresh_calendar)) as client:
        yield client


def stored(server: CalDAVServer, href: str) -> httpx.Response:
    with server.http() as http:
        return http.get(href)


async def test_discovers_calendars_from_the_server_root(caldav_server: CalDAVServer, seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server)) as client:
        calendars = await client.calendars()
        personal = await client.calendar("personal")
    assert personal.url == seeded_calendar
    assert personal in calendars


async def test_a_calendar_url_is_that_calendar_alone(caldav_server: CalDAVServer, seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server, seeded_calendar)) as client:
        calendars = await client.calendars()
        default = await client.calendar()
    assert [c.name for c in calendars] == ["Personal"]
    assert default.url == seeded_calendar


async def test_an_unknown_calendar_name_lists_the_known_ones(caldav_server: CalDAVServer,
                                                            seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server, seeded_calendar)) as client:
        with pytest.raises(CalendarNotFound,
                           match=r"no calendar called 'Work' \(calendars: Personal \([0-9a-f]{32}\)\)"):
            await client.calendar("Work")


async def test_a_calendar_is_found_by_the_last_segment_of_its_path(caldav_server: CalDAVServer,
                                                                   seeded_calendar: str) -> None:
    url = caldav_server.make_calendar("Family and home", segment="household", seed=False)  # /owner/household/
    async with CalendarClient(settings(caldav_server, default_calendar="household")) as client:
        assert (await client.calendar("household")).url == url
        assert (await client.calendar("Household/")).url == url
        assert (await client.calendar()).url == url  # the default, named the way the server's web UI shows it
        assert (await client.calendar("family AND home")).url == url
        assert (await client.calendar("personal")).url == seeded_calendar  # a display name comes first
        with pytest.raises(CalendarNotFound, match=r"Family and home \(household\)"):
            await client.calendar("owner")


async def test_lists_the_range_with_the_weekly_event_expanded(caldav_server: CalDAVServer,
                                                             seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server)) as client:
        events = (await client.events(*MARCH, calendar="Personal")).events
    syncs = [e for e in events if e.summary == "Team sync"]
    # Six Mondays at 10:00 Berlin time: 09:00 UTC in winter, 08:00 UTC after the 30 March change.
    assert [e.start.astimezone(UTC).strftime("%m-%d %H:%M") for e in syncs] == [
        "03-03 09:00", "03-10 09:00", "03-17 09:00", "03-24 09:00", "03-31 08:00", "04-07 08:00"]
    assert all(e.end - e.start == timedelta(hours=1) and e.rrule for e in syncs)
    holiday = next(e for e in events if e.summary == "Spring holiday")
    assert (holiday.start, holiday.end, holiday.all_day) == (date(2025, 3, 21), date(2025, 3, 22), True)
    train = next(e for e in events if e.summary == "Night train")
    assert train.end.astimezone(UTC) - train.start.astimezone(UTC) == timedelta(hours=4)
    assert [e.summary for e in events][:3] == ["Team sync", "Team sync", "Dentist"]
    assert {e.calendar for e in events} == {"Personal"}


async def test_a_narrow_range_holds_only_what_overlaps_it(caldav_server: CalDAVServer,
                                                         seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server, seeded_calendar)) as client:
        listing = await client.events(datetime(2025, 3, 10, tzinfo=BERLIN), datetime(2025, 3, 18, tzinfo=BERLIN))
        events = listing.events
    assert [(e.summary, e.start.day) for e in events] == [("Team sync", 10), ("Dentist", 12), ("Team sync", 17)]


async def test_gets_one_event_with_its_version(caldav_server: CalDAVServer, seeded_calendar: str) -> None:
    async with CalendarClient(settings(caldav_server)) as client:
        event = await client.get_event("dentist")
        same = await client.get_event_at(event.href)
        with pytest.raises(CalendarNotFound, match="no event with id 'dent'"):
            await client.get_event("dent")  # a substring of a UID is not that UID
    assert event.href == seeded_calendar + "dentist.ics"
    assert event.etag and event.etag == same.etag and event.calendar == same.calendar == "Personal"
    assert (event.location, event.description) == ("Dr. Weiss, Hauptstr. 5", "Bring the insurance card.")
    assert event.start == datetime(2025, 3, 12, 15, tzinfo=BERLIN) and event.start.tzinfo == BERLIN


async def test_wrong_password_is_an_auth_error(caldav_server: CalDAVServer) -> None:
    async with CalendarClient(settings(caldav_server, password="not it")) as client:
        with pytest.raises(CalendarAuthError, match="rejected the login for user 'owner'") as err:
            await client.calendars()
    assert "not it" not in str(err.value)


async def test_server_down_is_unreachable(caldav_server: CalDAVServer, caldav_down_url: str) -> None:
    async with CalendarClient(settings(caldav_server, caldav_down_url)) as client:
        with pytest.raises(CalendarUnreachable, match=r"cannot reach the calendar server http://127\.0\.0\.1:\d+"):
            await client.calendars()


async def test_a_silent_server_times_out(caldav_server: CalDAVServer, caldav_silent_url: str) -> None:
    async with CalendarClient(settings(caldav_server, caldav_silent_url, timeout=0.3)) as client:
        with pytest.raises(CalendarUnreachable, match=re.escape("did not answer within 0.3s")):
            await client.calendars()


async def test_create_round_trips_every_field(scratch: CalendarClient) -> None:
    new = EventFields(summary="Planning", start=datetime(2025, 10, 25, 9, tzinfo=BERLIN),
                      end=datetime(2025, 10, 25, 10, 30, tzinfo=BERLIN), location="Room 4",
                      description="Agenda: Q4", attendees=("carol@example.com",), rrule="FREQ=DAILY;COUNT=3")
    created = await scratch.create_event(new)
    read = await scratch.get_event(created.uid)
    assert read == created and read.etag
    listing = await scratch.events(datetime(2025, 10, 25, tzinfo=BERLIN), datetime(2025, 10, 28, tzinfo=BERLIN))
    occurrences = listing.events
    # Daily at 09:00 Berlin time across the 26 October change back to winter time.
    assert [e.start.astimezone(UTC).hour for e in occurrences if e.uid == created.uid] == [7, 8, 8]
    assert read.attendees == ("carol@example.com",) and read.start.tzinfo == BERLIN


async def test_create_all_day_defaults_to_one_day(scratch: CalendarClient) -> None:
    created = await scratch.create_event(EventFields(summary="Offsite", start=date(2025, 6, 2)))
    assert (created.start, created.end, created.all_day) == (date(2025, 6, 2), date(2025, 6, 3), True)


@pytest.mark.parametrize("fields, problem", [
    (EventFields(summary="x", start=date(2025, 6, 2), end=date(2025, 6, 1)), "must be after the start"),
    (EventFields(summary="x", start=date(2025, 6, 2), end=datetime(2025, 6, 3, tzinfo=UTC)), "both be dates"),
    (EventFields(summary="x", start=date(2025, 6, 2), rrule="weekly"), "has no FREQ"),
    (EventFields(summary="x", start=date(2025, 6, 2), attendees=("carol",)), "not an email address"),
    (EventFields(start=date(2025, 6, 2)), "needs a title"),
])
async def test_create_refuses_a_malformed_event(scratch: CalendarClient, fields: EventFields, problem: str) -> None:
    before = await scratch.events(datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidEvent, match=problem):
        await scratch.create_event(fields)
    assert await scratch.events(datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)) == before


async def test_update_changes_only_what_was_asked(caldav_server: CalDAVServer, scratch: CalendarClient) -> None:
    before = await scratch.get_event("night-train")
    after = await scratch.update_event(before, EventFields(start=datetime(2025, 3, 29, 22, 30, tzinfo=BERLIN)))
    assert after.etag != before.etag
    again = await scratch.get_event("night-train")
    assert again == after and again.summary == "Night train"
    # Moving the start keeps the real duration (four hours), even across the DST change.
    assert again.end.astimezone(UTC) - again.start.astimezone(UTC) == timedelta(hours=4)
    assert "SEQUENCE:1" in stored(caldav_server, again.href).text


async def test_update_keeps_attendee_replies_and_unknown_properties(caldav_server: CalDAVServer,
                                                                   scratch: CalendarClient) -> None:
    sync = await scratch.get_event("team-sync")
    changed = await scratch.update_event(sync, EventFields(attendees=("alice@example.com", "dave@example.com"),
                                                          rrule=""))
    text = stored(caldav_server, changed.href).text.replace("\r\n ", "")
    assert changed.attendees == ("alice@example.com", "dave@example.com") and changed.rrule == ""
    assert "CN=Alice" in text and "PARTSTAT=ACCEPTED" in text and "bob@" not in text


async def test_a_stale_update_or_delete_is_a_conflict(caldav_server: CalDAVServer, scratch: CalendarClient) -> None:
    stale = await scratch.get_event("dentist")
    current = await scratch.update_event(stale, EventFields(location="Dr. Weiss, room 2"))
    with pytest.raises(CalendarConflict):
        await scratch.update_event(stale, EventFields(summary="Dentist (moved)"))
    with pytest.raises(CalendarConflict):
        await scratch.delete_event(stale)
    assert await scratch.get_event("dentist") == current


async def test_delete_removes_the_event(caldav_server: CalDAVServer, scratch: CalendarClient) -> None:
    holiday = await scratch.get_event("spring-holiday")
    await scratch.delete_event(holiday)
    assert stored(caldav_server, holiday.href).status_code == 404
    with pytest.raises(CalendarNotFound):
        await scratch.get_event("spring-holiday")
