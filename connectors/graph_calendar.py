"""A Microsoft 365 / Outlook.com calendar over Microsoft Graph, offering what `CalendarClient` offers.

Microsoft's calendars have no CalDAV; Graph is their API. This client speaks it over httpx with the
account's bearer token and hands the calendar toolset the same shapes the CalDAV client does, so the
seven `calendar_*` tools, their previews and approvals work unchanged:

- calendars are `/me/calendars` (the one Graph marks `isDefaultCalendar` first: new events go there);
- a range is `calendarView` per calendar, recurring events expanded by Graph, times asked in UTC
  (`Prefer: outlook.timezone="UTC"`) and shown by the toolset in the owner's zone; all-day events are dates;
- an event's id is Graph's id (an occurrence stands for its series: its master's id and version), its
  version Graph's `@odata.etag`, and its `source` an iCalendar rendering of the fields the toolset edits;
- writes are conditional: a change or delete sends `If-Match` with the etag the owner approved, so an
  event changed elsewhere meanwhile is refused (412 -> `CalendarConflict`), never overwritten; a create
  carries the event's UID as Graph's `transactionId`, so a repeated POST does not make a second event.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, date, datetime, tzinfo
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx

from connectors import graph_recurrence, ical
from connectors.bearer import BearerAuth
from connectors.caldav import (
    CalendarAuthError,
    CalendarConflict,
    CalendarError,
    CalendarInfo,
    CalendarNotFound,
    CalendarUnreachable,
)
from connectors.calendar import Listing, find_calendar, instant
from connectors.ical import Event, EventFields, EventTime
from connectors.oauth_token import TokenProvider

log = logging.getLogger(__name__)

PAGE = 100  # events per calendarView page (Graph's maximum is 1000; pages follow @odata.nextLink)
_PREFER = 'outlook.timezone="UTC", outlook.body-content-type="text"'


class GraphCalendar:
    """The calendars of one Microsoft account. Use as an async context manager, or call `aclose()`."""

    def __init__(self, graph_url: str, address: str, token: TokenProvider, *, timeout: float = 30,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base = graph_url.rstrip("/")
        self.address = address
        self.timeout = timeout
        parsed = httpx.URL(self.base)
        self.where = f"{parsed.scheme}://{parsed.netloc.decode()}"
        self._http = httpx.AsyncClient(auth=BearerAuth(token), timeout=timeout, transport=transport,
                                       headers={"Prefer": _PREFER, "User-Agent": "anyy-calendar"})
        self._calendars: list[CalendarInfo] | None = None

    @property
    def server(self) -> str:
        return self.where

    @property
    def user(self) -> str:
        return self.address

    async def __aenter__(self) -> GraphCalendar:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, url: str, *, json: Any = None, headers: dict[str, str] | None = None,
                       params: dict[str, str] | None = None) -> httpx.Response:
        path = httpx.URL(url).path
        try:
            resp = await self._http.request(method, url, json=json, headers=headers, params=params)
        except httpx.TimeoutException:
            raise CalendarUnreachable(f"Microsoft Graph {self.where} did not answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise CalendarUnreachable(f"cannot reach Microsoft Graph {self.where}: {exc or type(exc).__name__}") \
                from None
        log.debug("graph method=%s path=%s status=%s", method, path, resp.status_code)
        status = resp.status_code
        if status == 401:
            raise CalendarAuthError(f"Microsoft Graph refused the access token for {self.address} "
                                    "(`anyy accounts test` checks the account)")
        if status == 403:
            raise CalendarAuthError(f"Microsoft Graph refused access to {path} (HTTP 403: the account may lack the "
                                    "Calendars.ReadWrite permission)")
        if status == 404:
            raise CalendarNotFound(f"{path} does not exist on Microsoft Graph")
        if status == 412:
            raise CalendarConflict(f"{path} changed on Microsoft Graph since it was read")
        if status >= 400:
            raise CalendarError(f"{method} {path} failed on Microsoft Graph: HTTP {status} "
                                f"{httpx.codes.get_reason_phrase(status)}".rstrip())
        return resp

    async def _get(self, url: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        resp = await self._request("GET", url, params=params)
        try:
            data = resp.json()
        except ValueError:
            raise CalendarError(f"GET {httpx.URL(url).path}: Microsoft Graph's answer is not JSON") from None
        if not isinstance(data, dict):
            raise CalendarError(f"GET {httpx.URL(url).path}: Microsoft Graph's answer is not an object")
        return data

    # -- calendars ----------------------------------------------------------------------------------

    async def calendars(self, *, refresh: bool = False) -> list[CalendarInfo]:
        """The account's calendars (the default one first), listed once and then cached."""
        if self._calendars is None or refresh:
            data = await self._get(f"{self.base}/me/calendars", {"$select": "id,name,isDefaultCalendar"})
            items = sorted(data.get("value") or [], key=lambda c: (not c.get("isDefaultCalendar"),
                                                                  str(c.get("name", "")).casefold()))
            self._calendars = [CalendarInfo(url=f"{self.base}/me/calendars/{quote(str(c['id']), safe='')}/",
                                            name=str(c.get("name") or c["id"])) for c in items if c.get("id")]
            log.info("graph calendars server=%s calendars=%d", self.where, len(self._calendars))
        return self._calendars

    async def calendar(self, name: str | None = None) -> CalendarInfo:
        """The calendar called `name` (as `CalendarClient.calendar` matches it), else the default one."""
        return find_calendar(await self.calendars(), name or "", self.where)

    async def _selected(self, name: str | None) -> list[CalendarInfo]:
        return [await self.calendar(name)] if name else await self.calendars()

    # -- reading ------------------------------------------------------------------------------------

    async def events(self, start: datetime, end: datetime, calendar: str | None = None) -> Listing:
        """Every occurrence overlapping [start, end), Graph expanding the series (calendarView), sorted."""
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("events() needs aware start and end times")
        window = {"startDateTime": _utc(start), "endDateTime": _utc(end), "$top": str(PAGE)}
        found: list[Event] = []
        masters: dict[str, Event] = {}
        for cal in await self._selected(calendar):
            url: str | None = f"{cal.url}calendarView"
            params: dict[str, str] | None = window
            while url:
                page = await self._get(url, params)
                for item in page.get("value") or []:
                    event = _event(item, href=f"{cal.url}events/{quote(str(item.get('id', '')), safe='')}",
                                   calendar=cal.name)
                    master_id = item.get("seriesMasterId")
                    if master_id:  # an occurrence is changed as its series: it carries the series' id and version
                        if master_id not in masters:
                            masters[master_id] = await self._event_in(cal, master_id)
                        master = masters[master_id]
                        event = replace(event, uid=master.uid, href=master.href, etag=master.etag, rrule=master.rrule)
                    found.append(event)
                url, params = page.get("@odata.nextLink"), None
        zone = start.tzinfo
        return Listing(events=sorted(found, key=lambda e: (instant(e.start, zone), e.summary)))

    async def _event_in(self, cal: CalendarInfo, event_id: str) -> Event:
        href = f"{cal.url}events/{quote(event_id, safe='')}"
        return _event(await self._get(href), href=href, calendar=cal.name, with_source=True)

    async def get_event(self, uid: str, calendar: str | None = None) -> Event:
        """One event (a series' master for a recurring one) with its etag and source, by Graph id."""
        for cal in await self._selected(calendar):
            try:
                return await self._event_in(cal, uid)
            except CalendarNotFound:
                continue
        raise CalendarNotFound(f"there is no event with id {uid!r}")

    async def get_event_at(self, href: str) -> Event:
        """The event stored at `href` (one of this account's Graph event URLs)."""
        href = self._here(href)
        name = next((c.name for c in await self.calendars() if href.startswith(c.url)), "")
        return _event(await self._get(href), href=href, calendar=name, with_source=True)

    # -- writing ------------------------------------------------------------------------------------

    def href_for(self, cal: CalendarInfo, uid: str) -> str:
        """Where a new event is created: the calendar's events collection (Graph gives the event its id)."""
        return f"{cal.url}events"

    async def create_event(self, fields: EventFields, calendar: str | None = None) -> Event:
        cal = await self.calendar(calendar)
        draft = ical.new_event(fields)
        return await self.put_event(self.href_for(cal, draft.uid), draft.source, draft.uid, cal.name, etag=None)

    async def update_event(self, event: Event, fields: EventFields) -> Event:
        changed = ical.apply_changes(event, fields)
        return await self.put_event(event.href, changed.source, event.uid, event.calendar, etag=event.etag)

    async def put_event(self, href: str, source: str, uid: str, calendar: str, *, etag: str | None) -> Event:
        """Create (etag None: POST to the collection `href`, `uid` as transactionId) or update (PATCH the
        fields that differ, If-Match `etag`) the event `source` describes. Returns it as stored."""
        href = self._here(href)
        wanted = ical.parse_event(source, uid)
        if etag is None:
            body = _graph_body(wanted) | {"transactionId": uid}
            resp = await self._request("POST", href, json=body)
            item = resp.json()
            log.info("graph event created calendar=%s", calendar)
            return _event(item, href=f"{href}/{quote(str(item['id']), safe='')}", calendar=calendar, with_source=True)
        current = _event(await self._get(href), href=href, calendar=calendar)
        if current.etag != etag:
            raise CalendarConflict(f"{httpx.URL(href).path} changed on Microsoft Graph since it was read")
        before, after = _graph_body(current), _graph_body(wanted)
        patch = {k: v for k, v in after.items() if before.get(k) != v}
        if not patch:
            return current
        resp = await self._request("PATCH", href, json=patch, headers={"If-Match": etag})
        log.info("graph event updated calendar=%s fields=%s", calendar, ",".join(sorted(patch)))
        return _event(resp.json(), href=href, calendar=calendar, with_source=True)

    async def delete_event(self, event: Event) -> None:
        await self.delete_at(event.href, event.etag)

    async def delete_at(self, href: str, etag: str) -> None:
        """Delete the event at `href` only while it is still at version `etag` (else `CalendarConflict`)."""
        await self._request("DELETE", self._here(href), headers={"If-Match": etag})
        log.info("graph event deleted")

    def _here(self, href: str) -> str:
        """`href`'s path on the configured Graph host: a stored write never sends the token elsewhere."""
        return self.where + httpx.URL(href).raw_path.decode()


# -- Graph JSON <-> Event -----------------------------------------------------------------------------

def _utc(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _zone(name: str) -> tzinfo:
    if name.upper() in ("UTC", "ETC/UTC", ""):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC  # Graph answers in UTC when asked (Prefer: outlook.timezone); a Windows zone name is not IANA


def _time(value: dict[str, Any] | None, all_day: bool) -> EventTime:
    if not value or not value.get("dateTime"):
        raise CalendarError("Microsoft Graph sent an event without a start or end")
    text = str(value["dateTime"])
    if all_day:
        return date.fromisoformat(text[:10])
    when = datetime.fromisoformat(text[:26].rstrip("Z"))  # Graph writes seven fractional digits
    return when.replace(tzinfo=_zone(str(value.get("timeZone") or "UTC")))


def _event(item: dict[str, Any], *, href: str, calendar: str, with_source: bool = False) -> Event:
    all_day = bool(item.get("isAllDay"))
    start, end = _time(item.get("start"), all_day), _time(item.get("end"), all_day)
    body = item.get("body") or {}
    description = str(body.get("content") or "") if body.get("contentType", "text") == "text" else \
        str(item.get("bodyPreview") or "")
    event = Event(
        uid=str(item.get("id", "")), summary=str(item.get("subject") or ""), start=start, end=end,
        location=str((item.get("location") or {}).get("displayName") or ""), description=description.strip(),
        attendees=tuple(str((a.get("emailAddress") or {}).get("address") or "") for a in item.get("attendees") or []
                        if (a.get("emailAddress") or {}).get("address")),
        rrule=graph_recurrence.from_graph(item.get("recurrence")),
        href=href, etag=str(item.get("@odata.etag") or ""), calendar=calendar,
        cancelled=bool(item.get("isCancelled")),
    )
    if not with_source:
        return event
    # The iCalendar text the toolset's `ical.apply_changes` edits; `put_event` turns it back into Graph fields.
    fields = EventFields(summary=event.summary, start=start, end=end, location=event.location,
                         description=event.description, attendees=event.attendees, rrule=event.rrule)
    return replace(event, source=ical.new_event(fields, uid=event.uid).source)


def _graph_time(value: EventTime) -> dict[str, str]:
    if not isinstance(value, datetime):
        return {"dateTime": f"{value.isoformat()}T00:00:00", "timeZone": "UTC"}
    zone = value.tzinfo
    if isinstance(zone, ZoneInfo):  # Graph takes IANA names, so a series keeps its wall-clock hour across DST
        return {"dateTime": value.replace(tzinfo=None).isoformat(timespec="seconds"), "timeZone": zone.key}
    return {"dateTime": _utc(value), "timeZone": "UTC"}


def _graph_body(event: Event) -> dict[str, Any]:
    """The Graph fields of `event` that the toolset edits."""
    start = _graph_time(event.start)
    return {
        "subject": event.summary, "isAllDay": event.all_day, "start": start, "end": _graph_time(event.end),
        "location": {"displayName": event.location}, "body": {"contentType": "text", "content": event.description},
        "attendees": [{"emailAddress": {"address": a}, "type": "required"} for a in event.attendees],
        "recurrence": graph_recurrence.to_graph(event.rrule, event.start, start["timeZone"]) if event.rrule else None,
    }
