"""What every schedule object shares: its errors, its optional time zone, and the firing interface the
automation service asks of it (`toolsets.schedule` holds the clock schedules, `toolsets.schedule_triggers`
the event ones)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator


class AutomationError(Exception):
    """A request about automations that is refused, phrased for the user (unknown id, time past)."""


class ScheduleError(AutomationError, ValueError):
    """A schedule that cannot be used: bad syntax, unknown zone, impossible interval."""


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name`; raises ScheduleError for an unknown one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r} (use an IANA name such as 'Europe/Berlin')") from None


class ScheduleBase(BaseModel):
    """A schedule: when an automation fires, with the zone its times are read in."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    timezone: str | None = Field(default=None,
                                 description="IANA time zone, e.g. Europe/Berlin; default: the owner's zone")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        return zone_named(v).key if v is not None else None

    def zone(self, default: ZoneInfo) -> ZoneInfo:
        return ZoneInfo(self.timezone) if self.timezone else default

    @property
    def recurring(self) -> bool:
        return True

    @property
    def event_driven(self) -> bool:
        """Whether events (mail, a calendar, a webhook) fire it rather than the clock."""
        return False

    def next_fire(self, after: datetime, anchor: datetime | None, default_tz: ZoneInfo) -> datetime | None:
        """The first firing strictly after aware `after` (UTC), or None when there is none.

        `anchor` is a known earlier or planned firing; interval schedules keep its phase.
        """
        raise NotImplementedError
