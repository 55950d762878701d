"""/remind refuses a time past its horizon (10 years) with the usage line, never an OverflowError."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.automations.reminders import REMIND_USAGE, parse_remind, remind_command
from gateway.automations.scheduler import AutomationService
from gateway.automations.when import WhenError
from store.outbox import Outbox
from store.records import Origin
from toolsets.schedule import HORIZON, AutomationError, Reminder, parse_schedule

NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 12, 7, 10, 0, tzinfo=NEW_YORK)
CHAT = Origin(surface="telegram", chat_id="100")

FAR = [
    "99999999 days x",
    "九" * 40 + "天 喝水",
    "9" * 400 + " days x",
    "9999-12-31 23:59 x",
    "3654 days x",  # a day past ten years (HORIZON is 3653 days)
    "600 weeks x",
    "2037-01-01 09:00 x",
]


@pytest.mark.parametrize("args", FAR)
def test_a_time_past_the_horizon_is_refused_by_name(args: str) -> None:
    with pytest.raises(WhenError, match="more than 10 years ahead"):
        parse_remind(args, NOW, NEW_YORK)


@pytest.mark.parametrize("args, at", [
    ("3653 days x", NOW + timedelta(days=3653)),
    ("2036-12-07 09:00 x", datetime(2036, 12, 7, 9, 0, tzinfo=NEW_YORK)),
])
def test_a_time_just_inside_the_horizon_is_read(args: str, at: datetime) -> None:
    schedule, _ = parse_remind(args, NOW, NEW_YORK)
    assert schedule.instant(NEW_YORK) == at and at - NOW <= HORIZON


async def test_the_command_answers_with_the_usage_line_and_sets_nothing(store) -> None:
    service = AutomationService(store, NEW_YORK, Outbox(store).enqueue, clock=lambda: NOW.astimezone(UTC))
    for args in FAR:
        reply = await remind_command(service, "telegram:1", CHAT, args)
        assert reply.startswith("I could not read that: ") and "more than 10 years ahead" in reply, reply
        assert reply.endswith(REMIND_USAGE)
    assert await service.list("telegram:1") == []


@pytest.mark.parametrize("args", ["0001-01-01 00:00 x", "0001-01-01 08:59 x", "1900-05-05 10:00 x"])
async def test_a_date_long_past_is_refused_with_the_usage_line_east_of_utc(store, args: str) -> None:
    """Year 1 at midnight in Tokyo is before datetime's smallest UTC instant: it overflowed the turn."""
    tokyo = ZoneInfo("Asia/Tokyo")
    service = AutomationService(store, tokyo, Outbox(store).enqueue, clock=lambda: NOW.astimezone(UTC))
    reply = await remind_command(service, "telegram:1", CHAT, args)
    assert reply == f"I could not read that: {args[:16]} is in the past.\n{REMIND_USAGE}"
    assert await service.list("telegram:1") == []


@pytest.mark.parametrize("at", ["9999-12-31T23:59:00", "2037-01-01T09:00:00"])
async def test_a_one_shot_automation_past_the_horizon_is_refused_by_the_service(store, at: str) -> None:
    """The same bound for the model's tools, which reach the service without /remind's parser."""
    service = AutomationService(store, NEW_YORK, Outbox(store).enqueue, clock=lambda: NOW.astimezone(UTC))
    schedule = parse_schedule({"type": "once", "at": at, "timezone": "America/New_York"})
    with pytest.raises(AutomationError, match="more than 10 years ahead"):
        await service.create("telegram:1", CHAT, "far", schedule, Reminder(kind="reminder", text="far"))
    assert await service.list("telegram:1") == []
