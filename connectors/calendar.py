"""The calendar connector: a CalDAV account seen as calendars and events.

`CalendarClient` joins the protocol (`connectors.caldav`) and the iCalendar mapping (`connectors.ical`):
discovery with a cached calendar list, listing with recurrences expanded, reading one event with its
version (ETag), and writes that are conditional on that version, so a change never overwrites an
event someone else changed in the meantime (`CalendarConflict`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from connectors import ical
from connectors.caldav import (
    CalDAV,
    CalendarAuthError,
    CalendarConflict,
    CalendarError,
    CalendarInfo,
    CalendarNotFound,
    CalendarUnreachable,
)
from connectors.ical import Event, EventFields, EventTime, InvalidEvent
from connectors.oauth_token import TokenProvider

__all__ = [
    "CalendarAuthError", "CalendarClient", "CalendarConflict", "CalendarError", "CalendarInfo",
    "CalendarNotFound", "CalendarSettings", "CalendarUnreachable", "Event", "EventFields", "EventTime",
    "InvalidEvent", "Listing", "find_calendar", "instant",
]

log = logging.getLogger(__name__)

GETCTAG = "{http://calendarserver.org/ns/}getctag"  # what changes when a collection's content does
SYNC_TOKEN = "{DAV:}sync-token"  # RFC 6578: the same, where getctag is not offered
EXPAND_TIMEOUT_S = 5.0  # a backstop: the bounds in `connectors.recurrence` keep expansion far below it


@dataclass(frozen=True)
class Listing:
    """The occurrences in a range, and notes on series that were cut short or not expanded."""

    events: list[Event]
    notes: list[str] = field(default_factory=list)


class CalendarSettings(BaseModel):
    """How to reach one CalDAV account."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="server root, principal, calendar home or one calendar's URL")
    username: str = ""
    password: SecretStr = SecretStr("")
    default_calendar: str = Field("", description="name or URL of the calendar new events go to")
    timeout: float = Field(30, gt=0, description="seconds to wait for the server")


class CalendarClient:
    """A CalDAV account. Use as an async context manager, or call `aclose()` when done.

    With `token` (an OAuth account: Google Calendar) requests carry its bearer token and the password is
    unused; `settings.username` is then the signed-in address, and `settings.url` its principal."""

    def __init__(self, settings: CalendarSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 token: TokenProvider | None = None) -> None:
        self.settings = settings
        self._dav = CalDAV(settings.url, settings.username, settings.password.get_secret_value(),
                           settings.timeout, transport=transport, token=token)
        self._calendars: list[CalendarInfo] | None = None

    @property
    def server(self) -> str:
        """The server's scheme, host and port (safe to show: no credentials)."""
        return self._dav.where

    @property
    def user(self) -> str:
        """Who the account signs in as ("" without a login)."""
        return self.settings.username

    async def __aenter__(self) -> CalendarClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._dav.aclose()

    async def calendars(self, *, refresh: bool = False) -> list[CalendarInfo]:
        """The account's event calendars, discovered once and then cached (`refresh` asks again)."""
        if self._calendars is None or refresh:
            self._calendars = await self._dav.discover()
        return self._calendars

    async def calendar(self, name: str | None = None) -> CalendarInfo:
        """The calendar called `name`: its display name (case-insensitive), its URL or path, or the last
        segment of its path (`personal` for `/demouser/personal/`, what a server's web UI often shows),
        in that order of precedence; without a name, the configured default calendar, else the first one."""
        return find_calendar(await self.calendars(), name or self.settings.default_calendar, self.server)

    async def _selected(self, name: str | None) -> list[CalendarInfo]:
        return [await self.calendar(name)] if name else await self.calendars()

    async def events(self, start: datetime, end: datetime, calendar: str | None = None) -> Listing:
        """Every event occurrence overlapping [start, end) in `calendar` (default: all calendars),
        recurring events expanded, sorted by start. All-day dates and floating times sort as if in
        `start`'s zone. Expansion is bounded (`connectors.recurrence`; what was cut is in `notes`)
        and runs on a worker thread within EXPAND_TIMEOUT_S, so the event loop never waits on it."""
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("events() needs aware start and end times")
        found = [(cal.name, res) for cal in await self._selected(calendar)
                 for res in await self._dav.query(cal.url, start=start, end=end)]
        try:
            async with asyncio.timeout(EXPAND_TIMEOUT_S):
                expansions = await asyncio.to_thread(
                    lambda: [ical.expand(res.data, start, end, href=res.href, etag=res.etag, calendar=name)
                             for name, res in found])
        except TimeoutError:
            raise CalendarError(f"expanding the recurring events took longer than {EXPAND_TIMEOUT_S:g}s; "
                                "list a shorter range") from None
        zone = start.tzinfo
        events = sorted((e for x in expansions for e in x.events), key=lambda e: (instant(e.start, zone), e.summary))
        return Listing(events=events, notes=[n for x in expansions for n in x.notes])

    async def change_tag(self, calendar: str | None = None) -> str:
        """A token that changes whenever an event of `calendar` (default: all) changes: each collection's
        getctag (the CalendarServer extension) or else its sync-token (RFC 6578); "" when one offers
        neither (then only listing the events tells)."""
        tags = [r.text(GETCTAG) or r.text(SYNC_TOKEN) for cal in await self._selected(calendar)
                for r in await self._dav.propfind(cal.url, [GETCTAG, SYNC_TOKEN], 0)]
        return "|".join(tags) if tags and all(tags) else ""

    async def get_event(self, uid: str, calendar: str | None = None) -> Event:
        """One event, with its ETag and source, by UID, searched in `calendar` (default: all)."""
        for cal in await self._selected(calendar):
            for res in await self._dav.query(cal.url, uid=uid):
                try:
                    return ical.parse_event(res.data, uid, href=res.href, etag=res.etag, calendar=cal.name)
                except CalendarError:
                    continue  # the server matched part of another event's UID
        raise CalendarNotFound(f"there is no event with id {uid!r}")

    async def get_event_at(self, href: str) -> Event:
        """The event stored at `href` (absolute, or relative to the configured URL), with its ETag."""
        res = await self._dav.get(str(httpx.URL(self._dav.url).join(href)))
        calendars = await self.calendars()
        name = next((c.name for c in calendars if res.href.startswith(c.url)), "")
        return ical.parse_event(res.data, href=res.href, etag=res.etag, calendar=name)

    async def create_event(self, fields: EventFields, calendar: str | None = None) -> Event:
        """Store a new event in `calendar` (default: the default calendar); returns it with its ETag."""
        cal = await self.calendar(calendar)
        draft = ical.new_event(fields)
        return await self.put_event(self.href_for(cal, draft.uid), draft.source, draft.uid, cal.name, etag=None)

    def href_for(self, cal: CalendarInfo, uid: str) -> str:
        """Where a new event with this UID is stored in `cal`."""
        return cal.url + quote(uid, safe="") + ".ics"

    async def update_event(self, event: Event, fields: EventFields) -> Event:
        """Apply `fields` to `event`, only if it is still the version that was read (else
        `CalendarConflict`, and nothing changes). Returns the event as stored."""
        if not event.etag:
            raise CalendarError(f"the server gave no version (ETag) for event {event.uid!r}; not changing it blindly")
        changed = ical.apply_changes(event, fields)
        return await self.put_event(event.href, changed.source, event.uid, event.calendar, etag=event.etag)

    async def put_event(self, href: str, source: str, uid: str, calendar: str, *, etag: str | None) -> Event:
        """Store the whole iCalendar `source` at `href`: a new resource when `etag` is None (refused if one
        exists there), else only over version `etag` (else `CalendarConflict`). Returns it as stored."""
        href = self._here(href)
        new_etag = await self._dav.put(href, source, etag=etag)
        log.info("calendar event %s calendar=%s uid=%s", "created" if etag is None else "updated", calendar, uid)
        if not new_etag:  # the server rewrote the event; read what it stored
            return await self.get_event_at(href)
        return ical.parse_event(source, uid, href=href, etag=new_etag, calendar=calendar)

    async def delete_event(self, event: Event) -> None:
        """Delete `event`, only if it is still the version that was read (else `CalendarConflict`)."""
        if not event.etag:
            raise CalendarError(f"the server gave no version (ETag) for event {event.uid!r}; not deleting it blindly")
        await self.delete_at(event.href, event.etag)
        log.info("calendar event deleted calendar=%s uid=%s", event.calendar, event.uid)

    async def delete_at(self, href: str, etag: str) -> None:
        """Delete the event at `href`, only if it is still at version `etag` (else `CalendarConflict`)."""
        await self._dav.delete(self._here(href), etag=etag)

    def _here(self, href: str) -> str:
        """`href`'s path on the configured server: a stored write (an approval's payload, possibly from
        before a config change) never sends the login to another host."""
        return self._dav.where + httpx.URL(href).raw_path.decode()


def find_calendar(calendars: list[CalendarInfo], wanted: str, server: str) -> CalendarInfo:
    """The calendar `wanted` names: its display name (case-insensitive), its URL or path, or the last
    segment of its path, in that order of precedence; "" is the first calendar."""
    if not wanted:
        if not calendars:
            raise CalendarNotFound(f"the account on {server} has no calendars")
        return calendars[0]
    folded, path = wanted.casefold(), wanted.rstrip("/")
    for matches in (lambda c: folded == c.name.casefold(),
                    lambda c: path in (c.url.rstrip("/"), httpx.URL(c.url).path.rstrip("/")),
                    lambda c: folded.strip("/") == _segment(c.url).casefold()):
        for cal in calendars:
            if matches(cal):
                return cal
    known = ", ".join(f"{c.name} ({_segment(c.url)})" for c in calendars) or "none"
    raise CalendarNotFound(f"there is no calendar called {wanted!r} (calendars: {known})")


def instant(value: EventTime, zone: tzinfo | None) -> datetime:
    """A sort key: the moment `value` starts, reading dates and floating times in `zone`."""
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=zone)
    return value if value.tzinfo else value.replace(tzinfo=zone)


def _segment(url: str) -> str:
    """The last segment of a collection's path: `personal` for `https://host/demouser/personal/`."""
    return httpx.URL(url).path.rstrip("/").rsplit("/", 1)[-1]
