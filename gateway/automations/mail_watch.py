"""New mail, pushed: one IMAP IDLE watch per account and folder, shared by every email trigger on it.

`MailWatcher` keeps one `FolderWatcher` per (account, folder) some enabled email trigger names, and
picks up created, changed and deleted triggers within `refresh_s`. A folder watcher holds the lease
``watch:mail:<account>:<folder>`` (on PostgreSQL one resident watches each folder; another takes over
once the holder's lease lapses) and, while it holds it, cycles: sweep, then IDLE until the server pushes
a change or `reconcile_s` passes, then sweep again. A dropped connection or a refused login is retried
with backoff (1 s doubling to a minute), and every reconnect starts with a sweep.

A sweep compares the folder with its stored watermark (UIDVALIDITY + last UID handled):

* a new UIDVALIDITY: the watermark becomes the folder's highest UID; nothing fires (the folder is not
  replayed).
* no watermark (the folder's first look): the messages received (INTERNALDATE) since its triggers were
  made (last changed) are handled as new ones, then the watermark becomes the folder's highest UID.
* each message fires only the triggers made before it arrived: one made while the resident was down
  does not fire for the folder's older mail that lands after the watermark.
* UIDs after the watermark: the newest `catch_up` are fired, in order; the owners of the folder's
  triggers are told once how many older ones were left out. Each message is recorded and claimed per
  automation before it is delivered (`AutomationService.fire_event`), then the watermark moves past it,
  so a crash anywhere in between fires it once after the restart, never twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from hashlib import sha256
from typing import Any

from connectors.imap_idle import FolderWatch
from gateway.automations.mail_events import headers_of, mail_event, passes
from store.claims import Claims
from store.db import Store
from store.leases import LEASE_S
from store.records import AutomationRecord, Outbound, parse_iso
from store.triggers import TriggerEvent, TriggerEvents, automations_version
from toolsets.schedule import parse_schedule
from toolsets.schedule_triggers import EmailTrigger

log = logging.getLogger(__name__)

Fire = Callable[[str, TriggerEvent], Awaitable[bool]]
Enqueue = Callable[[Outbound, str], Awaitable[int]]
OpenWatch = Callable[[str, str], Awaitable[FolderWatch]]  # (account, folder) -> a watch on its own connection
MAX_BACKOFF_S = 60.0


@dataclass
class Watched:
    """A folder's triggers: each automation with its email schedule."""

    account: str
    folder: str
    auth_serv_id: str = ""  # the account's receiving server (see connectors/mail_filter.py)
    triggers: list[tuple[AutomationRecord, EmailTrigger]] = field(default_factory=list)


class FolderWatcher:
    """Watches one folder while it holds the folder's lease; see the module's docstring."""

    def __init__(self, store: Store, watched: Watched, open_watch: OpenWatch, fire: Fire, enqueue: Enqueue, *,
                 reconcile_s: float, catch_up: int, lease_check_s: float = LEASE_S / 3) -> None:
        self.watched = watched
        self._events = TriggerEvents(store)
        self._claims = Claims(store)
        self._open_watch, self._fire, self._enqueue = open_watch, fire, enqueue
        self._reconcile_s, self._catch_up, self._lease_check_s = reconcile_s, catch_up, lease_check_s
        self.lease = f"watch:mail:{watched.account}:{watched.folder}"
        self._watch: FolderWatch | None = None
        self._cycle: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.swept = asyncio.Event()  # set after each sweep (tests and the benchmark wait on it)

    @property
    def watching(self) -> bool:
        """Whether this process holds the folder's lease and watches it now."""
        return self._cycle is not None

    def start(self) -> None:
        self._task = asyncio.create_task(self._hold(), name=f"mail-watch-{self.lease}")

    async def stop(self) -> None:
        """Stop watching, close the connection and hand the lease back (another resident takes over)."""
        for task in (self._task, self._cycle):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._cycle = None
        await self._close()
        with contextlib.suppress(Exception):
            await self._claims.release(self.lease)

    async def _hold(self) -> None:
        """Take or renew the lease every `lease_check_s`; watch only while it is held."""
        while True:
            try:
                holder = await self._claims.take(self.lease)
            except Exception as exc:  # cannot renew: stop, rather than watch on a lease that may lapse
                holder = f"unknown ({type(exc).__name__})"
            if holder is None and self._cycle is None:
                log.info("mail_watch_started lease=%s", self.lease)
                self._cycle = asyncio.create_task(self._run(), name=f"mail-cycle-{self.lease}")
            elif holder is not None and self._cycle is not None:
                log.warning("mail_watch_lease_lost lease=%s holder=%s", self.lease, holder)
                self._cycle.cancel()
                await asyncio.gather(self._cycle, return_exceptions=True)
                self._cycle = None
                await self._close()
            await asyncio.sleep(self._lease_check_s)

    async def _run(self) -> None:
        backoff = 1.0
        while True:
            try:
                if self._watch is None:
                    self._watch = await self._open_watch(self.watched.account, self.watched.folder)
                await self.sweep(self._watch)
                backoff = 1.0
                await self._watch.wait(self._reconcile_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a drop, a refused login, an unknown folder: try again later
                log.warning("mail_watch_retry lease=%s in_s=%.0f error=%s", self.lease, backoff, exc)
                await self._close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            with contextlib.suppress(Exception):
                await watch.close()

    async def sweep(self, watch: FolderWatch) -> None:
        """Fire the triggers for what arrived after the watermark (see the module's docstring)."""
        account, folder = self.watched.account, self.watched.folder
        mark = await self._events.watermark(account, folder)
        # A folder never looked at: what arrived since its triggers were made fires (the resident may have
        # been down, or slower than the mail); nothing older. Their last change counts: an automation
        # turned into an email trigger on a new folder must not replay the mail since its creation.
        since = min((_second(rec.updated_at) for rec, _ in self.watched.triggers), default=None) \
            if mark is None else None
        validity, last_uid = mark or (None, None)
        check = await watch.check(validity, last_uid, since)
        if mark is not None and mark[0] != check.uidvalidity:
            await self._events.set_watermark(account, folder, check.uidvalidity, check.highest)
            log.info("mail_watch_baseline lease=%s uidvalidity=%d highest=%d previous=%s", self.lease,
                     check.uidvalidity, check.highest, mark[0])
        elif check.new:
            arrived = await watch.arrivals(check.new)
            new = [uid for uid in check.new if since is None or arrived.get(uid, since) >= since]
            if len(new) > self._catch_up:
                await self._tell_skipped(check.uidvalidity, new[:-self._catch_up])
                new = new[-self._catch_up:]
            raws = await watch.fetch(new) if new else {}
            for uid in new:
                if uid in raws:
                    await self._message(check.uidvalidity, uid, raws[uid], arrived.get(uid))
                await self._events.set_watermark(account, folder, check.uidvalidity, uid)
        if mark is None:
            await self._events.set_watermark(account, folder, check.uidvalidity, check.highest)
            log.info("mail_watch_baseline lease=%s uidvalidity=%d highest=%d since=%s", self.lease,
                     check.uidvalidity, check.highest, since)
        self.swept.set()

    async def _message(self, uidvalidity: int, uid: int, raw: bytes, arrived: datetime | None) -> None:
        """Fire the folder's triggers whose filters pass and which existed when the message arrived (a
        trigger made later, e.g. while the resident was down, does not fire for the mail before it)."""
        headers = headers_of(raw)
        trusted = self.watched.auth_serv_id
        matching = [rec for rec, trigger in self.watched.triggers
                    if passes(trigger, headers, trusted) and (arrived is None or arrived >= _second(rec.created_at))]
        log.info("mail_watch_message lease=%s uid=%d triggers=%d matched=%d", self.lease, uid,
                 len(self.watched.triggers), len(matching))
        if matching:
            event = mail_event(self.watched.account, self.watched.folder, uidvalidity, uid, raw)
            for rec in matching:
                await self._fire(rec.id, event)

    async def _tell_skipped(self, uidvalidity: int, skipped: list[int]) -> None:
        """One notice per chat of the folder's triggers: how many older messages fired nothing."""
        text = (f"📭 {len(skipped)} older message(s) arrived in {self.watched.account}/{self.watched.folder} "
                f"while Anyy was not watching; triggers fired only for the newest {self._catch_up}.")
        origins = {rec.origin.model_dump_json(): rec.origin for rec, _ in self.watched.triggers}
        for key, origin in origins.items():
            await self._enqueue(Outbound(origin=origin, text=text),
                                f"mail-skipped:{self.lease}:{uidvalidity}:{skipped[-1]}:{sha256(key.encode()).hexdigest()[:12]}")


def _second(stamp: str) -> datetime:
    """A row's time to the second below: IMAP's INTERNALDATE has whole seconds, and mail in the second a
    trigger was made counts as after it."""
    return parse_iso(stamp).replace(microsecond=0)


class MailWatcher:
    """One `FolderWatcher` per watched (account, folder), following the email triggers' rows.

    Args:
        store: the open store.
        list_all: every automation (`AutomationService.list_all`).
        fire: `AutomationService.fire_event`.
        enqueue: the outbox's enqueue (the catch-up notice).
        mail: the mail accounts ("email": `AccountClients` of `EmailClient`).
        may_watch: whether a user's triggers may read the mailbox (user key -> bool); None: everyone's.
    """

    def __init__(self, store: Store, list_all: Callable[[], Awaitable[list[AutomationRecord]]], fire: Fire,
                 enqueue: Enqueue, mail: Any, *, refresh_s: float = 2.0, reconcile_s: float = 240.0,
                 catch_up: int = 50, may_watch: Callable[[str], Awaitable[bool]] | None = None) -> None:
        self._store, self._list_all, self._fire, self._enqueue, self._mail = store, list_all, fire, enqueue, mail
        self._refresh_s, self._reconcile_s, self._catch_up = refresh_s, reconcile_s, catch_up
        self._may_watch = may_watch
        self.folders: dict[tuple[str, str], FolderWatcher] = {}
        self._version: tuple[Any, ...] | None = None
        self._task: asyncio.Task[None] | None = None
        self._unknown: set[str] = set()
        self._refreshing = asyncio.Lock()

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._refresh_every(), name="mail-watch-refresh")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for watcher in self.folders.values():
            await watcher.stop()
        self.folders.clear()

    async def _refresh_every(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.refresh()
            except Exception:  # the next round tries again
                log.exception("mail_watch_refresh_failed")

    async def refresh(self) -> None:
        """Start, update and stop folder watchers to match the enabled email triggers (only when some
        automation changed since the last look: one small query otherwise)."""
        async with self._refreshing:  # one round at a time: the loop's and one asked for elsewhere
            await self._refresh()

    async def _refresh(self) -> None:
        version = await self._store.run(automations_version)
        if version == self._version:
            return
        self._version = version
        wanted: dict[tuple[str, str], Watched] = {}
        for rec in await self._list_all():
            schedule = parse_schedule(rec.schedule) if rec.schedule.get("type") == "email" else None
            if not rec.enabled or not isinstance(schedule, EmailTrigger):
                continue
            if self._may_watch is not None and not await self._may_watch(rec.user_key):
                if rec.id not in self._unknown:
                    log.warning("mail_watch_refused automation=%s user=%s reason=no_email_access", rec.id, rec.user_key)
                    self._unknown.add(rec.id)
                continue
            account = schedule.account or self._mail.default
            if account not in self._mail.names:
                if rec.id not in self._unknown:
                    log.warning("mail_watch_unknown_account automation=%s account=%s", rec.id, account)
                    self._unknown.add(rec.id)
                continue
            watched = Watched(account, schedule.folder, self._mail.auth_serv_id(account))
            wanted.setdefault((account, schedule.folder), watched).triggers.append(
                (rec, schedule))
        for key in [k for k in self.folders if k not in wanted]:
            await self.folders.pop(key).stop()
        for key, watched in wanted.items():
            if key in self.folders:
                self.folders[key].watched.triggers = watched.triggers
            else:
                watcher = FolderWatcher(self._store, watched, self._open, self._fire, self._enqueue,
                                        reconcile_s=self._reconcile_s, catch_up=self._catch_up)
                self.folders[key] = watcher
                watcher.start()

    async def _open(self, account: str, folder: str) -> FolderWatch:
        _name, client = await self._mail.pick(account)
        return FolderWatch(client.watch_connection(), folder)
