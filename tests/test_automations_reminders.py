"""/remind, /reminders and /cancel: parsing with a fixed `now`, commands against a real service."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.automations.reminders import (
    CANCEL_USAGE,
    REMIND_USAGE,
    cancel_command,
    parse_remind,
    remind_command,
    reminders_command,
)
from gateway.automations.scheduler import AutomationService
from gateway.automations.when import WhenError
from store.outbox import Outbox
from store.records import Origin

pytestmark = pytest.mark.both_backends

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 30, 10, 15, 30, tzinfo=BERLIN)  # a Monday
CHAT = Origin(surface="telegram", chat_id="100")


def instant(args: str, now: datetime = NOW) -> tuple[datetime, str]:
    schedule, text = parse_remind(args, now, BERLIN)
    assert schedule.timezone == "Europe/Berlin"
    return schedule.instant(BERLIN), text


@pytest.mark.parametrize("args, at, text", [
    ("10m stretch", NOW + timedelta(minutes=10), "stretch"),
    ("2h30m call back", NOW + timedelta(hours=2, minutes=30), "call back"),
    ("in 45s   tea  is ready", NOW + timedelta(seconds=45), "tea  is ready"),
    ("2026-12-01 09:00 dentist", datetime(2026, 12, 1, 9, 0, tzinfo=BERLIN), "dentist"),
    ("11:00 standup", datetime(2026, 11, 30, 11, 0, tzinfo=BERLIN), "standup"),  # later today
    ("09:00 standup", datetime(2026, 12, 1, 9, 0, tzinfo=BERLIN), "standup"),  # passed: tomorrow
    ("10:15 now-ish", datetime(2026, 12, 1, 10, 15, tzinfo=BERLIN), "now-ish"),  # this minute has begun
    ("9am gym", datetime(2026, 12, 1, 9, 0, tzinfo=BERLIN), "gym"),
    ("6:15pm dinner", datetime(2026, 11, 30, 18, 15, tzinfo=BERLIN), "dinner"),
    ("12am midnight", datetime(2026, 12, 1, 0, 0, tzinfo=BERLIN), "midnight"),
    ("tomorrow 7:30 run", datetime(2026, 12, 1, 7, 30, tzinfo=BERLIN), "run"),
])
def test_remind_syntax(args, at, text):
    assert instant(args) == (at, text)


@pytest.mark.parametrize("args, expected", [
    ("", "say when and what"),
    ("10m", "say what to remind you of"),
    ("in soon stretch", "cannot read the duration 'soon'"),
    ("0m stretch", "more than zero"),
    ("25:00 late", "there is no time 25:00"),
    ("13pm lunch", "there is no time 13pm"),
    ("2026-02-30 09:00 dentist", "there is no date 2026-02-30"),
    ("2026-12-01 dentist", "say the time after the day"),
    ("tomorrow", "say the time after the day"),
    ("someday dentist", "cannot read the time 'someday'"),
])
def test_unreadable_remind_arguments(args, expected):
    with pytest.raises(WhenError, match=expected):
        parse_remind(args, NOW, BERLIN)


def test_a_relative_reminder_in_the_repeated_hour_stays_exact():
    # 02:40 CET, the second pass through 02:xx on 2026-10-25: 10 minutes later is 02:50 CET, not CEST.
    second_pass = datetime(2026, 10, 25, 1, 40, tzinfo=UTC)
    at, _ = instant("10m tea", second_pass)
    assert at == datetime(2026, 10, 25, 1, 50, tzinfo=UTC)
    # A named time of day in that hour means its first occurrence, already past: the next day's.
    at, _ = instant("02:45 tea", second_pass)
    assert at == datetime(2026, 10, 26, 2, 45, tzinfo=BERLIN)


@pytest.fixture
def service(store) -> AutomationService:
    return AutomationService(store, BERLIN, Outbox(store).enqueue, clock=lambda: NOW.astimezone(UTC))


async def test_remind_then_list_then_cancel(service):
    reply = await remind_command(service, "telegram:1", CHAT, "2h30m call back")
    rec, = await service.list("telegram:1")
    assert reply == f"⏰ Reminder {rec.id} set for 12:45 CET: call back"
    assert rec.origin == CHAT and rec.action == {"kind": "reminder", "text": "call back"}
    await remind_command(service, "telegram:1", CHAT, "2026-12-01 09:00 dentist")
    listing = await reminders_command(service, "telegram:1")
    lines = listing.splitlines()
    assert lines[1] == f"{rec.id} · 12:45 CET · once · call back"
    assert lines[2].endswith("· Tue 1 Dec 09:00 CET · once · dentist")
    assert await reminders_command(service, "telegram:2") == "No reminders. Set one with /remind 10m stretch."
    assert await cancel_command(service, "telegram:2", rec.id) == f"There is no reminder {rec.id}. {CANCEL_USAGE}"
    assert await cancel_command(service, "telegram:1", rec.id) == f"Cancelled {rec.id} (call back)."
    assert len(await service.list("telegram:1")) == 1


async def test_bad_input_answers_with_usage(service):
    assert (await remind_command(service, "telegram:1", CHAT, "later stretch")).endswith(REMIND_USAGE)
    past = await remind_command(service, "telegram:1", CHAT, "2026-11-01 09:00 too late")
    assert past == ("I could not set that reminder: 2026-11-01 09:00 (Europe/Berlin) is in the past; "
                    "it is now 2026-11-30 10:15.")
    assert await cancel_command(service, "telegram:1", "") == CANCEL_USAGE
    assert await cancel_command(service, "telegram:1", "a b") == CANCEL_USAGE
    assert await service.list("telegram:1") == []
