"""/remind's everyday phrasings, English and Chinese, with a fixed `now` (a Monday in Berlin)."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.automations.reminders import parse_remind
from gateway.automations.when import WhenError, parse_when

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 30, 10, 15, 30, tzinfo=BERLIN)  # Monday 30 Nov


def local(day: int, hour: int, minute: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=BERLIN)


@pytest.mark.parametrize("args, at, text", [
    ("10min stretch", NOW + timedelta(minutes=10), "stretch"),
    ("10 min stretch", NOW + timedelta(minutes=10), "stretch"),
    ("in 10 minutes stretch", NOW + timedelta(minutes=10), "stretch"),
    ("1h30 tea", NOW + timedelta(hours=1, minutes=30), "tea"),
    ("2 hours and 15 minutes call mum", NOW + timedelta(hours=2, minutes=15), "call mum"),
    ("in an hour laundry", NOW + timedelta(hours=1), "laundry"),
    ("1.5h oven", NOW + timedelta(minutes=90), "oven"),
    ("3 days from now renew", NOW + timedelta(days=3), "renew"),
    ("10分钟后喝水", NOW + timedelta(minutes=10), "喝水"),
    ("半小时后 开会", NOW + timedelta(minutes=30), "开会"),
    ("一个半小时后收衣服", NOW + timedelta(minutes=90), "收衣服"),
    ("过两小时 打电话", NOW + timedelta(hours=2), "打电话"),
    ("十五分钟后 出门", NOW + timedelta(minutes=15), "出门"),
])
def test_durations(args, at, text):
    when = parse_when(args, NOW, BERLIN)
    # Rounded up to the whole second: NOW has none, so these are exact.
    assert (when.at, when.rest, when.relative) == (at, text, True)


@pytest.mark.parametrize("args, at, text", [
    ("friday 9:30 review", local(4, 9, 30, 12), "review"),
    ("9:30 friday review", local(4, 9, 30, 12), "review"),
    ("on fri at 9 review", local(4, 9, 0, 12), "review"),
    ("monday 11:00 later today", local(30, 11), "later today"),  # today, still ahead
    ("monday 9:00 next week", local(7, 9, 0, 12), "next week"),  # today's has passed: in 7 days
    ("tomorrow 9am dentist", local(1, 9, 0, 12), "dentist"),
    ("9am tomorrow dentist", local(1, 9, 0, 12), "dentist"),
    ("tmr 6:15 pm dinner", local(1, 18, 15, 12), "dinner"),
    ("at 9 gym", local(1, 9, 0, 12), "gym"),
    ("noon lunch", local(30, 12), "lunch"),
    ("tonight 8 movie", local(30, 20), "movie"),
    ("明天9点开会", local(1, 9, 0, 12), "开会"),
    ("明天上午9点半 开会", local(1, 9, 30, 12), "开会"),
    ("下午3点 取快递", local(30, 15), "取快递"),
    ("周五下午3:30 复盘", local(4, 15, 30, 12), "复盘"),
    ("星期天 10点 爬山", local(6, 10, 0, 12), "爬山"),
    ("今晚8点 看电影", local(30, 20), "看电影"),
    ("后天 8:00 体检", local(2, 8, 0, 12), "体检"),
])
def test_days_and_clock_times(args, at, text):
    when = parse_when(args, NOW, BERLIN)
    assert when.relative is False
    assert (when.at.replace(tzinfo=BERLIN), when.rest) == (at, text)


@pytest.mark.parametrize("args, expected", [
    ("10 mangoes", "cannot read the time '10'"),
    ("9 dentist", "cannot read the time '9'"),
    ("friday dentist", "say the time after the day"),
    ("明天 开会", "say the time after the day"),
    ("in a while stretch", "cannot read the duration 'a'"),
    ("/etc stretch", "cannot read the time '/etc'"),
])
def test_unreadable_phrases_say_what_is_wrong(args, expected):
    with pytest.raises(WhenError, match=expected):
        parse_when(args, NOW, BERLIN)


def test_a_relative_time_is_rounded_up_never_down():
    now = NOW.replace(microsecond=700_000)
    schedule, _ = parse_remind("4s tea", now, BERLIN)
    assert schedule.at == (now + timedelta(seconds=4, microseconds=300_000))
    assert schedule.at.microsecond == 0 and schedule.at > now + timedelta(seconds=4)
