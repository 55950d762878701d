"""Who owns running work, and for how long: owner ids and leases.

Work a live process is doing (a turn's inbound, an executing approval) carries its owner — host, process
id and the process's start time — and a lease the owner renews while it runs. Another process may take
the work over only when the lease has expired, or when the owner is on this host and provably gone (its
pid no longer exists, or now belongs to a process started at another time), which lets a restart after
`kill -9` recover at once instead of waiting out the lease.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from pathlib import Path

from sqlite_utils import Database

from store.records import iso, parse_iso, utcnow

LEASE_S = 30.0  # a live owner renews every LEASE_S / 3 (see `renew`), so only a stopped one lets it lapse


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None where
    there is no /proc or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields after "(comm)" start at field 3


HOST = socket.gethostname()
OWNER = f"{HOST}/{os.getpid()}/{_start_time(os.getpid()) or int(time.time())}"


def lease_until() -> str:
    """The expiry of a lease taken or renewed now."""
    return iso(utcnow() + timedelta(seconds=LEASE_S))


def owner_alive(owner: str) -> bool:
    """Whether `owner` may still be running. Owners on another host are trusted to their lease."""
    host, _, rest = owner.partition("/")
    pid_text, _, started = rest.partition("/")
    if host != HOST or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    now_started = _start_time(pid)
    if now_started is not None:
        return now_started == started
    try:
        os.kill(pid, 0)  # no /proc: the pid's existence is all we can check
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def takeable(owner: str | None, until: str | None) -> bool:
    """Whether work owned by `owner` under a lease until `until` may be taken over by this process
    (never its own: that is running here, or was left for the next start while shutting down)."""
    if owner is None:
        return True
    if owner == OWNER:
        return False
    return until is None or parse_iso(until) <= utcnow() or not owner_alive(owner)


def renew(db: Database) -> None:
    """Extend every lease this process holds (one UPDATE per table)."""
    until = lease_until()
    with db.atomic():
        db.execute("UPDATE inbound_queue SET lease_until = ? WHERE owner = ? AND state = 'pending'", [until, OWNER])
        db.execute("UPDATE approvals SET lease_until = ? WHERE owner = ? AND state = 'executing'", [until, OWNER])
