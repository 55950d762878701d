"""Microsoft Graph's calendar API (v1.0), as documented, on the fakes' HTTPS app under /v1.0.

    GET    /me                                              the signed-in user (mail, userPrincipalName;
           $select honoured): the token's user is the UPN, `mail` its mailbox's primary SMTP address
           (`graph.mailboxes[upn]`, default the UPN; "" answers null: a user without a mailbox)
    GET    /me/calendars, /me/calendar                      calendars (one default "Calendar" per user)
    GET    /me/calendarView, /me/calendar/calendarView, /me/calendars/{id}/calendarView
           ?startDateTime=&endDateTime= (required, ISO 8601; no offset = UTC)   occurrences in the window,
           recurring series expanded (type "occurrence", seriesMasterId), 10 per page unless $top, with
           @odata.nextLink; times in UTC or in the zone of `Prefer: outlook.timezone="..."`
           (answered with Preference-Applied); all-day events at midnight of that zone, isAllDay true
    POST   /me/events, /me/calendar/events, /me/calendars/{id}/events           201 with the event; a
           repeated transactionId returns the event it created before (Graph's retry guard)
    GET|PATCH|DELETE /me/events/{id} (also under /me/calendars/{id}/)           If-Match: the event's
           @odata.etag (none or "*": last writer wins); a stale one gets 412 ErrorIrresolvableConflict.
           An occurrence's id can be read or DELETEd (that occurrence is cancelled); PATCH edits whole series
           only (an occurrence gets 400 here), and an occurrence carries its series' etag
Every request needs a live Graph token of the fake authorization server (resource "graph"), else 401
InvalidAuthenticationToken; writes need Calendars.ReadWrite, reads Calendars.Read(Write), else 403
ErrorAccessDenied. Errors are Graph's `{"error": {"code", "message"}}`.

A test drives it through the `graph` fixture (tests/fixtures/oauth_fakes.py):
    graph.url                                        # what an account's graph_url is set to (<base>/v1.0)
    graph.add_event(user, {...Graph event JSON...})  # as another client would; returns the stored event
    graph.change_elsewhere(user, event_id, subject="Moved")   # edit it elsewhere: its etag changes
    graph.add_calendar(user, "Work"); graph.events(user); graph.requests   # (method, path, status)
"""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web
from dateutil import rrule

from tests.support.oauth_provider import OAuthFake

WINDOWS_ZONES = {"UTC": "UTC", "W. Europe Standard Time": "Europe/Berlin", "GMT Standard Time": "Europe/London",
                 "Eastern Standard Time": "America/New_York", "Pacific Standard Time": "America/Los_Angeles",
                 "Tokyo Standard Time": "Asia/Tokyo"}
_DAYS = {"monday": rrule.MO, "tuesday": rrule.TU, "wednesday": rrule.WE, "thursday": rrule.TH,
         "friday": rrule.FR, "saturday": rrule.SA, "sunday": rrule.SU}
_INDEX = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}
_FORMAT = "%Y-%m-%dT%H:%M:%S.0000000"


class GraphError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(WINDOWS_ZONES.get(name, name))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise GraphError(400, "ErrorTimeZoneNotSupportedException", f"A valid TimeZone value must be "
                         f"specified. The following TimeZone value is not supported: '{name}'.") from exc


def parse_time(value: dict[str, Any]) -> datetime:
    """A Graph dateTimeTimeZone as an aware datetime."""
    try:
        naive = datetime.fromisoformat(str(value["dateTime"])[:26].rstrip("Z"))
    except (KeyError, ValueError, TypeError) as exc:
        raise GraphError(400, "ErrorInvalidRequest", "Start and End need a dateTime and a timeZone.") from exc
    return naive.replace(tzinfo=zone(str(value.get("timeZone", "UTC"))))


def parse_window(value: str | None, name: str) -> datetime:
    if not value:
        raise GraphError(400, "ErrorInvalidParameter", "This request requires a time window specified by the "
                         "query string parameters StartDateTime and EndDateTime.")
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise GraphError(400, "ErrorInvalidParameter", f"The value of {name} is not a valid DateTime.") from exc
    return found if found.tzinfo else found.replace(tzinfo=UTC)


@dataclass
class Event:
    id: str
    calendar_id: str
    data: dict[str, Any]
    change_key: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))
    cancelled: set[date] = field(default_factory=set)

    @property
    def etag(self) -> str:
        return f'W/"{self.change_key}"'

    def touch(self) -> None:
        self.change_key, self.modified = secrets.token_urlsafe(12), datetime.now(UTC)

    def span(self) -> tuple[datetime, datetime]:
        return parse_time(self.data["start"]), parse_time(self.data["end"])

    def occurrences(self, until: datetime) -> list[tuple[datetime, str | None]]:
        """(start, occurrence date key) of the event or of each occurrence of its series up to `until`."""
        start, _ = self.span()
        recurrence = self.data.get("recurrence")
        if not recurrence:
            return [(start, None)]
        pattern, limits = recurrence.get("pattern", {}), recurrence.get("range", {})
        first = date.fromisoformat(limits.get("startDate", start.date().isoformat()))
        kind = pattern.get("type", "daily")
        rule: dict[str, Any] = {"interval": int(pattern.get("interval", 1)),
                                "dtstart": datetime.combine(first, start.timetz().replace(tzinfo=None))}
        days = [_DAYS[d.lower()] for d in pattern.get("daysOfWeek", [])]
        if kind == "daily":
            rule["freq"] = rrule.DAILY
        elif kind == "weekly":
            rule |= {"freq": rrule.WEEKLY, "byweekday": days or None,
                     "wkst": _DAYS[pattern.get("firstDayOfWeek", "sunday").lower()]}
        elif kind in {"absoluteMonthly", "absoluteYearly"}:
            rule |= {"freq": rrule.MONTHLY if kind == "absoluteMonthly" else rrule.YEARLY,
                     "bymonthday": int(pattern.get("dayOfMonth", first.day))}
            if kind == "absoluteYearly":
                rule["bymonth"] = int(pattern.get("month", first.month))
        elif kind == "relativeMonthly":
            rule |= {"freq": rrule.MONTHLY,
                     "byweekday": [d(_INDEX[pattern.get("index", "first")]) for d in days]}
        else:
            raise GraphError(400, "ErrorInvalidRequest", f"Unsupported recurrence pattern {kind!r} in the fake.")
        if limits.get("type") == "numbered":
            rule["count"] = int(limits["numberOfOccurrences"])
        elif limits.get("type") == "endDate":
            rule["until"] = datetime.combine(date.fromisoformat(limits["endDate"]), time(23, 59, 59))
        local = start.tzinfo
        found = []
        for naive in rrule.rrule(**rule):
            when = naive.replace(tzinfo=local)  # wall time in the series' zone: daylight saving moves UTC
            if when >= until:
                break
            if when.date() not in self.cancelled:
                found.append((when, when.strftime("%Y%m%d")))
        return found


class GraphFake:
    def __init__(self, oauth: OAuthFake) -> None:
        self.oauth = oauth
        self.lock = threading.RLock()
        self.calendars_by_user: dict[str, dict[str, dict[str, Any]]] = {}
        self.store: dict[str, dict[str, Event]] = {}  # user -> event id -> event
        self.requests: list[tuple[str, str, int]] = []
        self.mailboxes: dict[str, str] = {}  # UPN -> primary SMTP address, where they differ

    @property
    def url(self) -> str:
        return f"{self.oauth.base_url}/v1.0"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/v1.0/{tail:.*}", self.handle)

    # ---- test-side helpers -------------------------------------------------------------------------------
    def calendars(self, user: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            if user not in self.calendars_by_user:
                default = f"AAMkAGI2-{uuid.uuid5(uuid.NAMESPACE_URL, user).hex}"
                self.calendars_by_user[user] = {default: self._calendar(user, default, "Calendar", True)}
                self.store[user] = {}
            return self.calendars_by_user[user]

    def add_calendar(self, user: str, name: str) -> str:
        calendar_id = f"AAMkAGI2-{uuid.uuid4().hex}"
        with self.lock:
            self.calendars(user)[calendar_id] = self._calendar(user, calendar_id, name, False)
        return calendar_id

    def add_event(self, user: str, data: dict[str, Any], calendar_id: str | None = None) -> dict[str, Any]:
        with self.lock:
            return self._render(self._create(user, calendar_id or self._default(user), data), UTC, "UTC")

    def change_elsewhere(self, user: str, event_id: str, **fields: Any) -> str:
        """Edit an event as another device would; returns its new etag."""
        with self.lock:
            event = self.store[user][event_id]
            event.data |= fields
            event.touch()
            return event.etag

    def events(self, user: str) -> list[dict[str, Any]]:
        with self.lock:
            return [self._render(e, UTC, "UTC") for e in self.store.get(user, {}).values()]

    # ---- HTTP --------------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            with self.lock:
                status, answer, headers = self._route(request, body)
        except GraphError as exc:
            status, answer, headers = exc.status, {"error": {"code": exc.code, "message": exc.message}}, {}
        self.requests.append((request.method, request.path, status))
        if status == 204:
            return web.Response(status=204)
        return web.json_response(answer, status=status, headers=headers)

    def _route(self, request: web.Request, body: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        token = self.oauth.bearer(request.headers.get("Authorization"))
        if token is None or token.resource != "graph":
            raise GraphError(401, "InvalidAuthenticationToken", "Access token has expired or is not yet valid.")
        user, method = token.user, request.method
        parts = request.match_info["tail"].strip("/").split("/")
        if parts[0] != "me":
            raise GraphError(400, "BadRequest", "Only /me is served by the fake.")
        rest = parts[1:]
        scopes = {s.lower() for s in token.scopes}
        needed = {"calendars.readwrite"} if method in {"POST", "PATCH", "DELETE"} else {
            "calendars.read", "calendars.readwrite"}
        if rest and not scopes & needed:
            raise GraphError(403, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")
        calendars = self.calendars(user)
        if rest[:1] == ["calendar"]:
            rest = ["calendars", self._default(user), *rest[1:]]
        calendar_id = None
        if rest[:1] == ["calendars"] and len(rest) >= 2:
            calendar_id = rest[1]
            if calendar_id not in calendars:
                raise GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")
            rest = rest[2:] if len(rest) > 2 else ["calendar"]
        tz_name = request.headers.get("Prefer", "").partition('outlook.timezone="')[2].partition('"')[0]
        tz = zone(tz_name) if tz_name else UTC
        headers = {"Preference-Applied": f'outlook.timezone="{tz_name}"'} if tz_name else {}
        show = tz_name or "UTC"
        match method, rest:
            case "GET", []:
                return 200, self._me(user, request.query.get("$select", "")), {}
            case "GET", ["calendars"]:
                return 200, {"value": list(calendars.values())}, {}
            case "GET", ["calendar"]:
                return 200, calendars[calendar_id or self._default(user)], {}
            case "GET", ["calendarView"]:
                return 200, self._view(request, user, calendar_id or self._default(user), tz, show), headers
            case "POST", ["events"]:
                event = self._create(user, calendar_id or self._default(user), self._json(body))
                return 201, self._render(event, tz, show), headers
            case _, ["events", event_id]:
                return self._one(method, request, user, event_id, body, tz, show, headers)
        raise GraphError(400, "BadRequest", f"Unsupported request {method} /me/{'/'.join(rest)}.")

    def _me(self, user: str, select: str) -> dict[str, Any]:
        mail = self.mailboxes.get(user, user)
        me = {"id": uuid.uuid5(uuid.NAMESPACE_URL, user).hex, "displayName": "Owner Example", "mail": mail or None,
              "userPrincipalName": user, "givenName": "Owner", "surname": "Example"}
        wanted = {f.strip() for f in select.split(",") if f.strip()}
        return {k: v for k, v in me.items() if k in wanted} if wanted else me

    def _one(self, method: str, request: web.Request, user: str, event_id: str, body: bytes, tz: Any, show: str,
             headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
        master_id, _, occurrence = event_id.partition("_OCC_")
        event = self.store[user].get(master_id)
        if event is None or (occurrence and not event.data.get("recurrence")):
            raise GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")
        if_match = request.headers.get("If-Match")
        if method in {"PATCH", "DELETE"} and if_match not in {None, "*", event.etag}:
            raise GraphError(412, "ErrorIrresolvableConflict", "The send or update operation could not be "
                             "performed because the change key passed in the request does not match the current "
                             "change key for the item.")
        if method == "GET":
            return 200, self._render(event, tz, show), headers
        if method == "DELETE":
            if occurrence:
                event.cancelled.add(datetime.strptime(occurrence, "%Y%m%d").date())
                event.touch()
            else:
                del self.store[user][master_id]
            return 204, {}, {}
        if method == "PATCH" and not occurrence:
            changes = self._json(body)
            merged = event.data | changes
            self._validate(merged)
            event.data = merged
            event.touch()
            return 200, self._render(event, tz, show), headers
        raise GraphError(400, "ErrorInvalidRequest", "The fake edits whole series only; delete an occurrence instead.")

    # ---- model -------------------------------------------------------------------------------------------
    def _json(self, body: bytes) -> dict[str, Any]:
        try:
            data = json.loads(body or b"{}")
        except json.JSONDecodeError as exc:
            raise GraphError(400, "BadRequest", "Unable to read JSON request payload.") from exc
        if not isinstance(data, dict):
            raise GraphError(400, "BadRequest", "The request body must be a JSON object.")
        return data

    def _validate(self, data: dict[str, Any]) -> None:
        if "start" not in data or "end" not in data:
            raise GraphError(400, "ErrorInvalidRequest", "Your request can't be completed. Start and End are required.")
        start, end = parse_time(data["start"]), parse_time(data["end"])
        if end < start:
            raise GraphError(400, "ErrorInvalidRequest", "The end time of the event is before its start time.")
        if data.get("isAllDay") and (start.time() != time(0) or end.time() != time(0) or end == start):
            raise GraphError(400, "ErrorInvalidRequest", "An all-day event must start and end at midnight.")

    def _create(self, user: str, calendar_id: str, data: dict[str, Any]) -> Event:
        self.calendars(user)
        self._validate(data)
        if tid := data.get("transactionId"):  # Graph's guard against a retried POST creating a twin
            twin = next((e for e in self.store[user].values() if e.data.get("transactionId") == tid), None)
            if twin is not None:
                return twin
        organizer = {"emailAddress": {"name": "Owner Example", "address": user}}
        event = Event(f"AAMkAGI2EV-{uuid.uuid4().hex}", calendar_id, {"organizer": organizer, **data})
        self.store[user][event.id] = event
        return event

    def _default(self, user: str) -> str:
        return next(k for k, v in self.calendars(user).items() if v["isDefaultCalendar"])

    @staticmethod
    def _calendar(user: str, calendar_id: str, name: str, default: bool) -> dict[str, Any]:
        return {"id": calendar_id, "name": name, "color": "auto", "isDefaultCalendar": default, "canEdit": True,
                "canShare": True, "changeKey": secrets.token_urlsafe(8),
                "owner": {"name": "Owner Example", "address": user}}

    def _view(self, request: web.Request, user: str, calendar_id: str, tz: Any, show: str) -> dict[str, Any]:
        q = request.query
        lower = parse_window(q.get("startDateTime") or q.get("StartDateTime"), "startDateTime")
        upper = parse_window(q.get("endDateTime") or q.get("EndDateTime"), "endDateTime")
        found: list[tuple[datetime, dict[str, Any]]] = []
        for event in self.store[user].values():
            if event.calendar_id != calendar_id:
                continue
            start, end = event.span()
            for when, key in event.occurrences(upper):
                ends = when + (end - start)
                if when < upper and ends > lower:
                    found.append((when, self._render(event, tz, show, when, key)))
        found.sort(key=lambda pair: pair[0])
        top, skip = int(q.get("$top", 10)), int(q.get("$skip", 0))
        page: dict[str, Any] = {"value": [item for _, item in found[skip:skip + top]]}
        if skip + top < len(found):
            page["@odata.nextLink"] = f"{self.url}{request.path[5:]}?" + urlencode({**dict(q), "$skip": skip + top})
        return page

    def _render(self, event: Event, tz: Any, show: str, when: datetime | None = None,
                key: str | None = None) -> dict[str, Any]:
        data = event.data
        start, end = event.span()
        if when is not None:
            start, end = when, when + (end - start)

        def shown(moment: datetime) -> dict[str, str]:
            if data.get("isAllDay"):  # all-day: the same dates, at midnight wherever the reader is
                return {"dateTime": moment.replace(tzinfo=None).strftime(_FORMAT), "timeZone": show}
            return {"dateTime": moment.astimezone(tz).strftime(_FORMAT), "timeZone": show}

        body = data.get("body") or {"contentType": "text", "content": ""}
        out = {"@odata.etag": event.etag, "id": event.id if key is None else f"{event.id}_OCC_{key}",
               "createdDateTime": event.created.isoformat(), "lastModifiedDateTime": event.modified.isoformat(),
               "changeKey": event.change_key, "subject": data.get("subject", ""), "body": body,
               "bodyPreview": str(body.get("content", ""))[:255], "isAllDay": bool(data.get("isAllDay")),
               "isCancelled": bool(data.get("isCancelled")), "showAs": data.get("showAs", "busy"),
               "location": data.get("location") or {"displayName": ""}, "attendees": data.get("attendees", []),
               "organizer": data.get("organizer"),
               "start": shown(start), "end": shown(end),
               "transactionId": data.get("transactionId"),
               "originalStartTimeZone": data["start"].get("timeZone", "UTC"),
               "originalEndTimeZone": data["end"].get("timeZone", "UTC"),
               "recurrence": data.get("recurrence") if key is None else None,
               "type": "singleInstance" if not data.get("recurrence") else "seriesMaster" if key is None
               else "occurrence", "seriesMasterId": event.id if key else None}
        return out
