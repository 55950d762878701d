"""The schedule object: validation (every bad form is a clear error) and firing times, DST included."""

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from toolsets.cron import CronError, parse_cron
from toolsets.schedule import CANONICAL_FORMS, Cron, Interval, Once, parse_action, parse_schedule, resolve_local

BERLIN = ZoneInfo("Europe/Berlin")
UTC = UTC


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def error_of(data: object) -> str:
    with pytest.raises(ValidationError) as info:
        parse_schedule(data)
    return str(info.value)


@pytest.mark.parametrize("data", [
    {"when": "2026-12-01T09:00:00"},
    {"every": "30m"},
    {"cron": "0 9 * * *"},
    {"recurring": True, "type": "once", "at": "2026-12-01T09:00:00"},
    {"type": "every", "cron": "0 9 * * *"},
])
def test_legacy_fields_are_rejected_showing_the_canonical_form(data):
    message = error_of(data)
    assert "legacy schedule field" in message
    assert CANONICAL_FORMS in message


@pytest.mark.parametrize("data, expected", [
    ("every day at 9", "schedule must be an object"),
    ({"type": "daily", "at": "09:00"}, "unknown schedule type 'daily'"),
    ({"type": "every", "interval": "30m"}, "needs mode 'interval' or 'cron'"),
    ({"type": "once", "at": "tomorrow"}, "at"),
    ({"type": "once", "at": "2026-12-01T09:00:00", "extra": 1}, "Extra inputs are not permitted"),
])
def test_malformed_schedules_say_what_is_wrong(data, expected):
    assert expected in error_of(data)


@pytest.mark.parametrize("interval, expected", [
    ("0m", "between 1s and 366d"),
    ("400d", "between 1s and 366d"),
    ("-5m", "cannot read the duration"),
    ("30x", "cannot read the duration"),
    ("soon", "cannot read the duration"),
    ("", "cannot read the duration"),
    ("99999999999999999w", "too long"),
])
def test_impossible_intervals_are_rejected(interval, expected):
    assert expected in error_of({"type": "every", "mode": "interval", "interval": interval})


@pytest.mark.parametrize("cron, expected", [
    ("61 * * * *", "minute '61' is out of range"),
    ("0 9 * *", "has 4 fields; expected 5"),
    ("0 9 * * 8", "day of week '8' is out of range"),
    ("0 0 30 2 *", "never matches"),
    ("*/0 * * * *", "step must be at least 1"),
    ("0 9 * * mon-xyz", "invalid value 'xyz'"),
    ("0 17-9 * * *", "out of range"),
])
def test_bad_cron_is_rejected(cron, expected):
    assert expected in error_of({"type": "every", "mode": "cron", "cron": cron})


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Europe/Berln", "../etc/passwd"])
def test_unknown_zones_are_rejected(zone):
    message = error_of({"type": "every", "mode": "interval", "interval": "1h", "timezone": zone})
    assert f"unknown time zone {zone!r}" in message


def test_actions_are_reminder_or_prompt_only():
    assert parse_action({"kind": "reminder", "text": " call mum "}).text == "call mum"
    assert parse_action({"kind": "prompt", "prompt": "summarize my inbox"}).prompt == "summarize my inbox"
    for bad in ({"kind": "script", "command": "rm -rf /"}, {"kind": "reminder", "text": "  "}, {"text": "x"}):
        with pytest.raises(ValidationError):
            parse_action(bad)


def test_cron_uses_crontab_weekdays_and_or_of_day_fields():
    weekdays = parse_cron("0 9 * * 1-5")
    saturday = datetime(2026, 12, 5, 10, 0)
    assert weekdays.next_after(saturday) == datetime(2026, 12, 7, 9, 0)  # Monday, not Sunday or Tuesday
    assert weekdays.next_after(datetime(2026, 12, 11, 9, 0)) == datetime(2026, 12, 14, 9, 0)  # Fri -> Mon
    assert parse_cron("0 9 * * mon-fri").weekdays == weekdays.weekdays
    assert parse_cron("0 0 * * 7").weekdays == parse_cron("0 0 * * sun").weekdays == frozenset({0})
    # Both day fields restricted: the 13th or any Friday (standard crontab), whichever comes first.
    either = parse_cron("0 0 13 * 5")
    assert either.next_after(datetime(2026, 12, 1)) == datetime(2026, 12, 4)  # Friday 4 Dec
    assert either.next_after(datetime(2026, 12, 11)) == datetime(2026, 12, 13)  # Sunday the 13th
    assert parse_cron("@daily").next_after(datetime(2026, 12, 1, 0, 0)) == datetime(2026, 12, 2)
    assert parse_cron("5/20 * * * *").minutes == (5, 25, 45)
    assert parse_cron("0 0 29 2 *").next_after(datetime(2097, 3, 1)) == datetime(2104, 2, 29)
    with pytest.raises(CronError):
        parse_cron("@fortnightly")


def test_daily_nine_in_berlin_fires_at_nine_local_on_both_sides_of_each_transition():
    daily = Cron(type="every", mode="cron", cron="0 9 * * *", timezone="Europe/Berlin")
    spring = [berlin(2026, 3, 28, 9), berlin(2026, 3, 29, 9), berlin(2026, 3, 30, 9)]
    autumn = [berlin(2026, 10, 24, 9), berlin(2026, 10, 25, 9), berlin(2026, 10, 26, 9)]
    for days in (spring, autumn):
        after = days[0] - timedelta(hours=1)
        for expected in days:
            after = daily.next_fire(after, None, BERLIN)
            assert after == expected and after.astimezone(BERLIN).hour == 9
    # 24 h apart in wall time, 23 h and 25 h apart in elapsed time.
    assert spring[2] - spring[1] == spring[1] - spring[0] == timedelta(hours=24)
    assert (spring[1].astimezone(UTC) - spring[0].astimezone(UTC)) == timedelta(hours=23)
    assert (autumn[1].astimezone(UTC) - autumn[0].astimezone(UTC)) == timedelta(hours=25)


def test_a_time_that_does_not_exist_moves_forward_to_the_jump():
    # 2026-03-29 in Berlin: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does not exist.
    assert resolve_local(datetime(2026, 3, 29, 2, 30), BERLIN) == utc(2026, 3, 29, 1, 0)
    nightly = Cron(type="every", mode="cron", cron="30 2 * * *")
    first = nightly.next_fire(utc(2026, 3, 28, 12), None, BERLIN)
    assert first == utc(2026, 3, 29, 1, 0)
    assert nightly.next_fire(first, None, BERLIN) == berlin(2026, 3, 30, 2, 30)
    once = Once(type="once", at=datetime(2026, 3, 29, 2, 30), timezone="Europe/Berlin")
    assert once.instant(BERLIN) == utc(2026, 3, 29, 1, 0)
    # Several nonexistent minutes collapse onto the one instant: it fires once.
    every_ten = Cron(type="every", mode="cron", cron="*/10 2 * * *")
    assert every_ten.next_fire(utc(2026, 3, 29, 0, 30), None, BERLIN) == utc(2026, 3, 29, 1, 0)
    assert every_ten.next_fire(utc(2026, 3, 29, 1, 0), None, BERLIN) == berlin(2026, 3, 30, 2, 0)
    # A half-hour jump (Lord Howe Island, 02:00 -> 02:30) is found as exactly as a full hour.
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    jump = resolve_local(datetime(2026, 10, 4, 2, 15), lord_howe)
    assert jump.astimezone(lord_howe).replace(tzinfo=None) == datetime(2026, 10, 4, 2, 30)


def test_a_time_that_exists_twice_fires_once_at_its_first_occurrence():
    # 2026-10-25 in Berlin: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens twice.
    assert resolve_local(datetime(2026, 10, 25, 2, 30), BERLIN) == utc(2026, 10, 25, 0, 30)
    nightly = Cron(type="every", mode="cron", cron="30 2 * * *")
    first = nightly.next_fire(utc(2026, 10, 24, 12), None, BERLIN)
    assert first == utc(2026, 10, 25, 0, 30)
    assert nightly.next_fire(first, None, BERLIN) == utc(2026, 10, 26, 1, 30)  # not the second 02:30
    once = Once(type="once", at=datetime(2026, 10, 25, 2, 30), timezone="Europe/Berlin")
    assert once.instant(BERLIN) == utc(2026, 10, 25, 0, 30)
    # An exact instant (with an offset) in the repeated hour is kept as given.
    second = Once(type="once", at=datetime(2026, 10, 25, 2, 30, tzinfo=timezone(timedelta(hours=1))))
    assert second.instant(BERLIN) == utc(2026, 10, 25, 1, 30)


def test_interval_is_elapsed_time_and_keeps_its_phase():
    half_hour = Interval(type="every", mode="interval", interval="30m")
    anchor = utc(2026, 3, 29, 0, 45)
    assert half_hour.next_fire(utc(2026, 3, 29, 0, 0), None, BERLIN) == utc(2026, 3, 29, 0, 30)
    assert half_hour.next_fire(anchor, anchor, BERLIN) == utc(2026, 3, 29, 1, 15)  # across the jump: 30 real min
    assert half_hour.next_fire(utc(2026, 3, 29, 3, 50), anchor, BERLIN) == utc(2026, 3, 29, 4, 15)
    assert half_hour.next_fire(utc(2026, 3, 29, 0, 40), anchor, BERLIN) == anchor
    assert Interval(type="every", mode="interval", interval="1h30m").length == timedelta(minutes=90)


def test_once_has_no_firing_after_its_time():
    once = Once(type="once", at=datetime(2026, 12, 1, 9, 0))
    assert once.next_fire(berlin(2026, 12, 1, 8, 59), None, BERLIN) == berlin(2026, 12, 1, 9, 0)
    assert once.next_fire(berlin(2026, 12, 1, 9, 0), None, BERLIN) is None
    assert once.recurring is False and Interval(type="every", mode="interval", interval="1h").recurring
