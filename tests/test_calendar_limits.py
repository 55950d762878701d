"""Recurrence expansion is bounded: a FREQ=SECONDLY invite must not freeze the process.

Against Radicale (tests/fixtures/caldav.py) through the connector and the calendar_list tool, and
against `connectors.ical` directly for rules whose start lies far back (Radicale itself spends
minutes filtering those by time range, which is the server's cost, not ours).
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import recurring_ical_events

from connectors import calendar as calendar_module
from connectors import ical, recurrence
from connectors.calendar import CalendarClient, CalendarError, CalendarSettings
from store.db import Store
from tests.fixtures.caldav import CalDAVServer, seed_ics
from tests.support.context import RecordingContext
from toolsets import calendar as cal_tools

UTC = UTC
BERLIN = ZoneInfo("Europe/Berlin")
DAY = (datetime(2026, 12, 1, 9, tzinfo=UTC), datetime(2026, 12, 2, 9, tzinfo=UTC))
SECONDLY = "SUMMARY:Every second\nDTSTART:20261201T080000Z\nDTEND:20261201T080001Z\nRRULE:FREQ=SECONDLY"


def _rss_kb(key: str) -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def put(server: CalDAVServer, calendar_url: str, uid: str, body: str) -> None:
    with server.http() as http:
        http.put(f"{calendar_url}{uid}.ics", content=seed_ics(uid, body),
                 headers={"Content-Type": "text/calendar"}).raise_for_status()


async def test_a_secondly_event_in_radicale_lists_within_5_s_and_100_mb(
        caldav_server: CalDAVServer, fresh_calendar: str, store: Store) -> None:
    put(caldav_server, fresh_calendar, "every-second", SECONDLY)
    settings = CalendarSettings(url=fresh_calendar, username=caldav_server.username, password=caldav_server.password)
    async with CalendarClient(settings) as client:
        ticks = 0

        async def heartbeat() -> None:  # the event loop stays free while the expansion runs
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(heartbeat())
        Path("/proc/self/clear_refs").write_text("5")  # restart the peak-RSS mark from now
        before, started = _rss_kb("VmRSS"), time.monotonic()
        listing = await client.events(*DAY)
        took, grown_mb = time.monotonic() - started, (_rss_kb("VmHWM") - before) / 1024
        beat.cancel()
        assert took < 5, f"took {took:.1f}s"
        assert grown_mb < 100, f"peak RSS grew by {grown_mb:.0f} MB"
        assert ticks > 0
        every = [e for e in listing.events if e.uid == "every-second"]
        assert recurrence.MAX_OCCURRENCES <= len(every) <= recurrence.MAX_OCCURRENCES + 2
        assert every[0].start == DAY[0] and every[1].start == DAY[0] + timedelta(seconds=1)
        assert len(listing.notes) == 1 and "'Every second' (id every-second, repeats FREQ=SECONDLY) repeats " \
            f"more than {recurrence.MAX_OCCURRENCES} times in this range" in listing.notes[0]

        text = await cal_tools.calendar_list.call(
            RecordingContext(store=store, tz=BERLIN, services={"calendar": client}),
            cal_tools.calendar_list.args_model.model_validate({"start": "2026-12-01T10:00", "end": "2026-12-02T10:00"}))
        assert f"Note: 'Every second' (id every-second, repeats FREQ=SECONDLY) repeats more than " \
               f"{recurrence.MAX_OCCURRENCES} times" in text


def test_a_secondly_rule_started_long_ago_is_fast_forwarded_not_walked() -> None:
    window = (datetime(2026, 12, 1, 9, tzinfo=UTC), datetime(2026, 12, 1, 9, 1, tzinfo=UTC))
    data = seed_ics("old", "SUMMARY:Since November\nDTSTART:20261101T000000Z\nDTEND:20261101T000002Z\n"
                           "RRULE:FREQ=SECONDLY")
    started = time.monotonic()
    out = ical.expand(data, *window)
    assert time.monotonic() - started < 1  # walking a month of seconds took ~23 s and +170 MB
    assert [e.start for e in out.events] == [window[0] - timedelta(seconds=1)] + \
        [window[0] + timedelta(seconds=s) for s in range(60)]  # the one still running at 9:00 included
    assert out.notes == []


@pytest.mark.parametrize(("rule", "days"), [("FREQ=HOURLY;INTERVAL=5", 1), ("FREQ=MINUTELY;INTERVAL=7", 0.5),
                                            ("FREQ=DAILY;INTERVAL=3", 7), ("FREQ=WEEKLY;INTERVAL=2", 21)])
def test_fast_forwarding_keeps_exactly_the_same_occurrences_across_dst(rule: str, days: float) -> None:
    body = (f"SUMMARY:Lattice\nDTSTART;TZID=Europe/Berlin:20250301T013000\nDTEND;TZID=Europe/Berlin:20250301T023000\n"
            f"RRULE:{rule}\nEXDATE;TZID=Europe/Berlin:20251026T013000")
    data = seed_ics("lattice", body)
    start = datetime(2025, 10, 26, tzinfo=BERLIN) - timedelta(days=days / 2)  # Berlin leaves summer time at 3:00
    window = (start, start + timedelta(days=days))
    reference = sorted((o.start, o.end) for o in recurring_ical_events.of(ical._calendar(data, "")).between(*window))
    fast = ical.expand(data, *window)
    assert sorted((e.start, e.end) for e in fast.events) == reference and reference
    all_day = seed_ics("days", "SUMMARY:Every other day\nDTSTART;VALUE=DATE:20000101\nDTEND;VALUE=DATE:20000102\n"
                               "RRULE:FREQ=DAILY;INTERVAL=2")
    expected = [o.start for o in recurring_ical_events.of(ical._calendar(all_day, "")).between(*window)]
    assert [e.start for e in ical.expand(all_day, *window).events] == expected and expected


def test_a_costly_rule_that_cannot_be_fast_forwarded_is_reported_not_expanded() -> None:
    data = seed_ics("nine", "SUMMARY:Nine o'clock seconds\nDTSTART:20261101T090000Z\nDTEND:20261101T090001Z\n"
                            "RRULE:FREQ=SECONDLY;BYHOUR=9")
    started = time.monotonic()
    out = ical.expand(data, datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
    assert time.monotonic() - started < 1
    assert out.events == []
    assert '"Nine o\'clock seconds" (id nine, repeats FREQ=SECONDLY;BYHOUR=9) was not expanded' in out.notes[0]


def test_a_series_without_a_start_is_a_calendar_error() -> None:
    data = seed_ics("nostart", "SUMMARY:No start\nRRULE:FREQ=DAILY")
    with pytest.raises(CalendarError, match="cannot expand the recurring event at the resource: No DTSTART"):
        ical.expand(data, datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))


def test_ordinary_rules_are_untouched() -> None:
    data = seed_ics("weekly", "SUMMARY:Team sync\nDTSTART;TZID=Europe/Berlin:20250303T100000\n"
                              "DTEND;TZID=Europe/Berlin:20250303T110000\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE;COUNT=40")
    out = ical.expand(data, datetime(2025, 3, 1, tzinfo=BERLIN), datetime(2025, 6, 1, tzinfo=BERLIN))
    assert len(out.events) == 26 and out.notes == []


async def test_expansion_runs_off_the_loop_with_a_time_limit(caldav_server: CalDAVServer, fresh_calendar: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calendar_module, "EXPAND_TIMEOUT_S", 0.0)
    settings = CalendarSettings(url=fresh_calendar, username=caldav_server.username, password=caldav_server.password)
    async with CalendarClient(settings) as client:
        with pytest.raises(CalendarError, match="took longer than 0s; list a shorter range"):
            await client.events(datetime(2025, 3, 1, tzinfo=BERLIN), datetime(2025, 5, 1, tzinfo=BERLIN))
