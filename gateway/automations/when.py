"""Everyday phrasings of "when", in English and Chinese, read into one instant: the start of `/remind`.

    10m · 10min · in 10 minutes · 1h30 · 2 hours and 15 minutes · an hour
    09:00 · 9am · 6:15 pm · noon · at 9
    tomorrow 9am · friday 9:30 · 9:30 friday · next mon at 8 · 2026-12-01 09:00
    10分钟后 · 半小时后 · 一个半小时后 · 明天9点 · 周五上午9点半 · 下午3点 · 后天 8:00

A small grammar of regular expressions rather than a general date parser: it is fast to import, and what
it accepts is exactly what its tests list. A time of day means its next occurrence; a weekday, the next
one within 7 days (today, if the time is still ahead). A relative time is rounded *up* to the whole second,
so a reminder never fires before the time it was set for. Nothing further ahead than 10 years
(`toolsets.schedule.HORIZON`) is read: a phrase past it is refused by name, before any date arithmetic
could overflow; a date more than 10 years back (year 1 too) is refused as in the past, for the same reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from toolsets.schedule import HORIZON, PAST_HORIZON, resolve_local

_HORIZON_S = HORIZON.total_seconds()


class WhenError(ValueError):
    """The phrase could not be read; the message says which part."""


@dataclass(frozen=True)
class When:
    """What a phrase meant: an exact instant (`relative`) or a local wall-clock time in the zone."""

    at: datetime
    relative: bool
    rest: str  # the text after the phrase


_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_NUM = r"(?:\d+(?:\.\d+)?|an?(?=\s)|[零〇一二两三四五六七八九十]+)"
_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1, "秒钟": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60, "分": 60, "分钟": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "小时": 3600, "个小时": 3600, "钟头": 3600,
    "个钟头": 3600, "d": 86400, "day": 86400, "days": 86400, "天": 86400, "w": 604800, "wk": 604800,
    "week": 604800, "weeks": 604800, "周": 604800, "个星期": 604800, "星期": 604800,
}
# Longest first, so "minutes" wins over "m" and "个小时" over "小时"; a Latin unit must end its word.
_UNIT = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))
_PART = re.compile(rf"\s*(?:and\s+|,\s*)?(?P<n>{_NUM})\s*(?P<half>个半)?(?P<u>{_UNIT})(?![a-z])", re.IGNORECASE)
_HALF_HOUR = re.compile(r"\s*半(?:个)?(?:小时|钟头)")
_TRAILING_MINUTES = re.compile(r"(?P<n>\d{1,2})(?![\d:a-z])", re.IGNORECASE)  # the "30" of "1h30"
_IN = re.compile(r"(?:in\s+|过\s*)", re.IGNORECASE)
_AFTER = re.compile(r"\s*(?:以后|之后|后|from now|later)", re.IGNORECASE)

_WEEKDAYS = {"mon": 0, "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wed": 2, "wednesday": 2, "thu": 3,
             "thur": 3, "thurs": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5, "sun": 6,
             "sunday": 6}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_DAY = "|".join(sorted(["today", "tonight", "tomorrow", "tmrw", "tmr", *_WEEKDAYS], key=len, reverse=True))
_DAY = re.compile(
    rf"(?:on\s+|next\s+|this\s+)?(?P<en>{_EN_DAY})(?![a-z])|(?P<iso>\d{{4}}-\d{{2}}-\d{{2}})"
    r"|(?P<zh>今天|今晚|明天|明早|明晚|后天)|(?:下?(?:周|星期|礼拜))(?P<zhwd>[一二三四五六日天])",
    re.IGNORECASE)
_EN_CLOCK = re.compile(
    r"(?P<at>at\s+)?(?:(?P<word>noon|midnight)|(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?)"
    r"(?![A-Za-z0-9:])", re.IGNORECASE)
_ZH_CLOCK = re.compile(
    r"(?P<part>凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?\s*(?P<h>\d{1,2}|[零〇一二两三四五六七八九十]+)\s*(?:点|點|時|时|:)"
    r"\s*(?:(?P<half>半)|(?P<m>\d{1,2}|[零〇一二两三四五六七八九十]+)\s*分?)?")
_PM_PARTS = {"下午", "傍晚", "晚上"}

USAGE_EXAMPLES = ("10m stretch · in 2 hours call back · 1h30 tea · 09:00 standup · tomorrow 9am dentist · "
                  "friday 9:30 review · 2026-12-01 09:00 dentist · 10分钟后 喝水 · 明天上午9点 开会")


def parse_when(args: str, now: datetime, tz: ZoneInfo) -> When:
    """Read the phrase at the start of `args` as of aware `now` in `tz`; the rest is the reminder's text."""
    text = args.strip()
    if not text:
        raise WhenError("say when and what")
    relative = _relative(text)
    if relative is not None:
        delta, end = relative
        at = now + delta
        # Round up: a due time that drops its fraction of a second would fire before the time asked for.
        if at.microsecond:
            at = at.replace(microsecond=0) + timedelta(seconds=1)
        return When(at.astimezone(tz), True, _rest(text, end))
    today = now.astimezone(tz).date()
    day = _day(text, 0, today)
    clock, end = _clock(text, day.end if day else 0, after_day=day is not None)
    if clock is None:
        if day is not None:
            raise WhenError("say the time after the day, e.g. friday 9:30 or 明天9点")
        raise WhenError(f"cannot read the time {text.split()[0]!r}")
    if day is None and (day := _day(text, end, today)) is not None:
        end = day.end
    if day is not None and day.evening and clock.hour < 12:
        clock = clock.replace(hour=clock.hour + 12)  # "tonight 8", "今晚8点"
    at = datetime.combine(day.date if day else today, clock)
    ahead = at - now.astimezone(tz).replace(tzinfo=None)
    if ahead > HORIZON:
        raise WhenError(PAST_HORIZON)
    if -ahead > HORIZON:  # refused here: near year 1 the move to UTC below would overflow, east of UTC
        raise WhenError(f"{at.isoformat(' ', 'minutes')} is in the past")  # strftime drops year 1's zeros
    # Without a named date the time is the next one ahead: tomorrow's, or a weekday's in a week.
    if resolve_local(at, tz) <= now and (day is None or day.weekday):
        at += timedelta(days=7 if day else 1)
    return When(at, False, _rest(text, end))


def _relative(text: str) -> tuple[timedelta, int] | None:
    pos = m.end() if (m := _IN.match(text)) else 0
    seconds, units = 0.0, []
    while True:
        if (half := _HALF_HOUR.match(text, pos)) is not None:
            seconds, pos = seconds + 1800, half.end()
            units.append(3600)
            continue
        part = _PART.match(text, pos)
        if part is None:
            break
        unit = _UNITS[part["u"].lower()]
        number = _number(part["n"])
        if number > _HORIZON_S / unit:  # checked before the product: "九九…九天" is an int past any float
            raise WhenError(PAST_HORIZON)
        seconds += (number + (0.5 if part["half"] else 0)) * unit  # "一个半小时": 1.5 h
        units.append(unit)
        pos = part.end()
        if unit == 3600 and (tail := _TRAILING_MINUTES.match(text, pos)) is not None:
            seconds, pos = seconds + int(tail["n"]) * 60, tail.end()  # "1h30": the bare number is minutes
    if not units:
        if pos:
            raise WhenError(f"cannot read the duration {text[pos:].split()[0] if text[pos:].split() else ''!r}")
        return None
    if (after := _AFTER.match(text, pos)) is not None:
        pos = after.end()
    if not _boundary(text, pos):
        return None  # "10 mangoes": not a duration after all
    if seconds <= 0:
        raise WhenError("the duration must be more than zero")
    if seconds > _HORIZON_S:
        raise WhenError(PAST_HORIZON)
    return timedelta(seconds=seconds), pos


@dataclass(frozen=True)
class _Day:
    date: date
    end: int
    weekday: bool = False  # a weekday name: the next one, a week on when its time has passed
    evening: bool = False  # "tonight", "今晚": a bare 8 means 20:00


def _day(text: str, pos: int, today: date) -> _Day | None:
    start = pos
    while start < len(text) and text[start].isspace():
        start += 1
    m = _DAY.match(text, start)
    if m is None or not _boundary(text, m.end()):
        return None
    if m["iso"]:
        try:
            return _Day(date.fromisoformat(m["iso"]), m.end())
        except ValueError:
            raise WhenError(f"there is no date {m['iso']}") from None
    word = (m["en"] or m["zh"] or "").lower()
    evening = word in ("tonight", "今晚", "明晚")
    if word in ("today", "tonight", "今天", "今晚"):
        return _Day(today, m.end(), evening=evening)
    if word in ("tomorrow", "tmrw", "tmr", "明天", "明早", "明晚"):
        return _Day(today + timedelta(days=1), m.end(), evening=evening)
    if word == "后天":
        return _Day(today + timedelta(days=2), m.end())
    weekday = _WEEKDAYS[word] if word else _ZH_WEEKDAYS[m["zhwd"]]
    return _Day(today + timedelta(days=(weekday - today.weekday()) % 7), m.end(), weekday=True)


def _clock(text: str, pos: int, *, after_day: bool) -> tuple[time | None, int]:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if (zh := _ZH_CLOCK.match(text, pos)) is not None and (zh["part"] or not zh["h"].isdigit() or "点" in zh[0]
                                                          or "點" in zh[0] or "时" in zh[0] or "時" in zh[0]):
        hour = int(_number(zh["h"]))
        minute = 30 if zh["half"] else int(_number(zh["m"])) if zh["m"] else 0
        if (zh["part"] in _PM_PARTS and hour < 12) or (zh["part"] == "中午" and hour < 5):
            hour += 12
        return _time(hour, minute, zh[0].strip()), zh.end()
    en = _EN_CLOCK.match(text, pos)
    if en is None:
        return None, pos
    if en["word"]:
        return time(12 if en["word"].lower() == "noon" else 0), en.end()
    # A bare "9" is a time only where a time is expected: after "at" or a day ("friday 9").
    if not (en["m"] or en["ampm"] or en["at"] or after_day):
        return None, pos
    hour, minute = int(en["h"]), int(en["m"] or 0)
    if en["ampm"]:
        if not 1 <= hour <= 12:
            raise WhenError(f"there is no time {en[0].strip()}")
        hour = hour % 12 + (12 if en["ampm"].lower().startswith("p") else 0)
    return _time(hour, minute, en[0].strip()), en.end()


def _time(hour: int, minute: int, written: str) -> time:
    if hour > 23 or minute > 59:
        raise WhenError(f"there is no time {written}")
    return time(hour, minute)


def _number(text: str) -> float:
    if text.lower() in ("a", "an"):
        return 1
    if text[0].isdigit():
        return float(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)
    value = 0
    for ch in text:
        value = value * 10 + _ZH_DIGITS[ch]
    return value


def _boundary(text: str, pos: int) -> bool:
    """The phrase may end at `pos`: not inside a Latin word or number ("10mangoes"); Chinese needs no space."""
    def word(ch: str) -> bool:
        return ch.isascii() and ch.isalnum()
    return pos >= len(text) or pos == 0 or not (word(text[pos]) and word(text[pos - 1]))


def _rest(text: str, end: int) -> str:
    rest = text[end:].strip().lstrip(",，:：").strip()
    if not rest:
        raise WhenError("say what to remind you of")
    return rest
