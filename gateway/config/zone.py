"""The machine's time zone, as the config's `[runtime] timezone = ""` means it."""

from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def system_zone() -> tuple[str, str]:
    """The machine's IANA zone and where it came from: `$TZ` when it names one, else the
    /etc/localtime link (or Debian's /etc/timezone), else ("UTC", "fallback")."""
    tz = os.environ.get("TZ", "").removeprefix(":")
    if tz and is_zone(tz):
        return tz, "$TZ"
    try:  # the link's own target names the zone (".../zoneinfo/Europe/Berlin"); a further hop may not
        name = os.readlink("/etc/localtime").partition("zoneinfo/")[2]
    except OSError:
        name = ""
    if name and is_zone(name):
        return name, "/etc/localtime"
    try:
        name = Path("/etc/timezone").read_text().strip()
    except OSError:
        name = ""
    if name and is_zone(name):
        return name, "/etc/timezone"
    return "UTC", "fallback"


def is_zone(name: str) -> bool:
    """`name` is an IANA time zone this machine knows."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
