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
from datetime import datetime, timedelta
from pathlib import Path

from store.records import iso, parse_iso, utcnow
from store.tables import Database

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
# This process. A Store's owner is this unless it was given another (two residents in one test process).
OWNER = f"{HOST}/{os.getpid()}/{_start_time(os.getpid()) or int(time.time())}"


def lease_until(now: datetime | None = None) -> str:
    """The expiry of a lease taken or renewed at `now` (the store's clock, `Store.now`)."""
    return iso((now or utcnow()) + timedelta(seconds=LEASE_S))


def owner_alive(owner: str) -> bool:
    """Whether `owner` may still be running. Owners on another host are trusted to their lease."""
    host, _, rest = owner.partition("/")
    pid_text, _, rest = rest.partition("/")
    started = rest.split("/", 1)[0]  # after it, a name that tells two stores of one process apart
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


def takeable(owner: str | None, until: str | None, me: str = OWNER, now: datetime | None = None) -> bool:
    """Whether work owned by `owner` under a lease until `until` may be taken over by `me` (never its
    own: that is running here, or was left for the next start while shutting down)."""
    if owner is None:
        return True
    if owner == me:
        return False
    return until is None or parse_iso(until) <= (now or utcnow()) or not owner_alive(owner)


_RENEWED = (  # table, the state in which its owner's lease matters
    ("inbound_queue", "state = 'pending'"),
    ("approvals", "state = 'executing'"),
    ("outbox", "state = 'pending'"),
    ("automation_runs", "status = 'claimed'"),
    ("subagent_jobs", "state = 'running'"),
    ("leases", "1 = 1"),
)


def renew(db: Database, owner: str = OWNER, now: datetime | None = None) -> None:
    """Extend every lease `owner` holds (one UPDATE per table)."""
    until = lease_until(now)
    with db.atomic():
        for table, live in _RENEWED:
            db.execute(f"UPDATE {table} SET lease_until = ? WHERE owner = ? AND {live}", [until, owner])


def take_lease(db: Database, name: str, owner: str, now: datetime) -> str | None:
    """Take or renew the named lease for `owner` when it is free, expired, already `owner`'s, or held
    by a process on this host that is provably gone. Returns None when taken, else the holder."""
    until = lease_until(now)
    row = db.execute(
        "INSERT INTO leases (name, owner, lease_until) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE"
        " SET owner = excluded.owner, lease_until = excluded.lease_until"
        " WHERE leases.owner = excluded.owner OR leases.lease_until <= ? RETURNING owner",
        [name, owner, until, iso(now)]).fetchone()
    if row is not None:
        return None
    held = db.execute("SELECT owner, lease_until FROM leases WHERE name = ?", [name]).fetchone()
    if held is None:  # released in between: try once more
        return take_lease(db, name, owner, now)
    if owner_alive(held[0]):
        return str(held[0])
    cur = db.execute("UPDATE leases SET owner = ?, lease_until = ? WHERE name = ? AND owner = ?",
                     [owner, until, name, held[0]])  # conditional on the dead holder we saw
    return None if cur.rowcount == 1 else str(held[0])


def release_lease(db: Database, name: str, owner: str) -> None:
    db.execute("DELETE FROM leases WHERE name = ? AND owner = ?", [name, owner])
