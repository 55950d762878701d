"""The CalDAV protocol (RFC 4791 over WebDAV) spoken directly over `httpx.AsyncClient`.

Why not the `caldav` package: caldav 3.x depends on niquests and urllib3-future, and installing
urllib3-future replaces the `urllib3` module for every other package in the environment (its install
hook shadows the real urllib3). A connector must not change the HTTP stack under python-telegram-bot,
slack-sdk and the rest, and the handful of requests a calendar needs (PROPFIND, REPORT, GET, PUT,
DELETE) are small enough to speak ourselves on the httpx client the project already uses.

This module knows URLs, XML and status codes; it does not parse iCalendar (see `connectors.ical`).
Every failure is a `CalendarError` whose message says what failed (login, reachability, a missing
resource, a version conflict) and never contains the password.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET  # expat in Python >= 3.11 refuses entity-expansion bombs
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from connectors.bearer import BearerAuth
from connectors.oauth_token import TokenProvider

log = logging.getLogger(__name__)

DAV = "DAV:"
CALDAV = "urn:ietf:params:xml:ns:caldav"


def _tag(ns: str, name: str) -> str:
    return f"{{{ns}}}{name}"


RESOURCETYPE = _tag(DAV, "resourcetype")
DISPLAYNAME = _tag(DAV, "displayname")
GETETAG = _tag(DAV, "getetag")
CURRENT_USER_PRINCIPAL = _tag(DAV, "current-user-principal")
CALENDAR_HOME_SET = _tag(CALDAV, "calendar-home-set")
CALENDAR_DATA = _tag(CALDAV, "calendar-data")
COMPONENT_SET = _tag(CALDAV, "supported-calendar-component-set")


class CalendarError(Exception):
    """A calendar operation failed; the message is meant for a person (and the model)."""


class CalendarAuthError(CalendarError):
    """The server rejected the login, or refused access to a resource."""


class CalendarUnreachable(CalendarError):
    """The server could not be reached, or did not answer in time."""


class CalendarNotFound(CalendarError):
    """A calendar or an event does not exist."""


class CalendarConflict(CalendarError):
    """The resource changed on the server since it was read (HTTP 412 Precondition Failed)."""


@dataclass(frozen=True)
class CalendarInfo:
    """One calendar collection: its absolute URL (ending in '/') and display name."""

    url: str
    name: str


@dataclass(frozen=True)
class Resource:
    """One calendar object resource: where it lives, its version (ETag) and its iCalendar text."""

    href: str
    etag: str
    data: str


@dataclass(frozen=True)
class _Response:
    """One `<d:response>` of a multistatus: the absolute URL and its successfully returned properties."""

    url: str
    props: dict[str, ET.Element]

    def text(self, name: str) -> str:
        el = self.props.get(name)
        return (el.text or "").strip() if el is not None else ""

    def href(self, name: str, base: str) -> str | None:
        el = self.props.get(name)
        href = el.find(_tag(DAV, "href")) if el is not None else None
        return str(httpx.URL(base).join(href.text.strip())) if href is not None and href.text else None

    @property
    def is_event_calendar(self) -> bool:
        rtype = self.props.get(RESOURCETYPE)
        if rtype is None or rtype.find(_tag(CALDAV, "calendar")) is None:
            return False
        comps = self.props.get(COMPONENT_SET)
        # A missing component set means "any component" (RFC 4791 5.2.3); task-only lists are skipped.
        return comps is None or any(c.get("name") == "VEVENT" for c in comps)


class CalDAV:
    """An authenticated connection pool to one CalDAV server: Basic auth with a username and password, or
    an OAuth bearer token from `token` (Google Calendar)."""

    def __init__(self, url: str, username: str, password: str, timeout: float,
                 transport: httpx.AsyncBaseTransport | None = None, token: TokenProvider | None = None) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.username = username
        self.timeout = timeout
        self.bearer = token is not None
        parsed = httpx.URL(self.url)
        # Where errors say they went: scheme, host and port, never the userinfo a URL might carry.
        self.where = f"{parsed.scheme}://{parsed.netloc.decode()}"
        auth: httpx.Auth | None = BearerAuth(token) if token is not None else \
            httpx.BasicAuth(username, password) if username else None
        self._http = httpx.AsyncClient(
            auth=auth,
            timeout=timeout, follow_redirects=True, transport=transport,
            headers={"User-Agent": "anyy-calendar"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, url: str, *, body: str | None = None,
                      headers: dict[str, str] | None = None) -> httpx.Response:
        """Send one request; map transport failures and error statuses to `CalendarError`s."""
        path = httpx.URL(url).path
        try:
            resp = await self._http.request(method, url, content=body, headers=headers)
        except httpx.TimeoutException:
            raise CalendarUnreachable(
                f"the calendar server {self.where} did not answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise CalendarUnreachable(f"cannot reach the calendar server {self.where}: {reason}") from None
        log.debug("caldav method=%s path=%s status=%s", method, path, resp.status_code)
        status = resp.status_code
        if status == 401 and self.bearer:
            raise CalendarAuthError(f"the calendar server {self.where} refused the access token for "
                                    f"{self.username!r} (`anyy accounts test` checks the account)")
        if status == 401:
            raise CalendarAuthError(
                f"the calendar server {self.where} rejected the login for user {self.username!r} "
                "(check the username and password; some providers require an app-specific password)")
        if status == 403:
            raise CalendarAuthError(f"the calendar server {self.where} refused access to {path} (HTTP 403)")
        if status in (404, 410):
            raise CalendarNotFound(f"{path} does not exist on the calendar server {self.where}")
        if status == 412:
            raise CalendarConflict(f"{path} changed on the calendar server since it was read")
        if status >= 400:
            # The standard phrase of the code: the server's own reason phrase is its words, not ours.
            raise CalendarError(f"{method} {path} failed on {self.where}: HTTP {status} "
                                f"{httpx.codes.get_reason_phrase(status)}".rstrip())
        return resp

    async def _multistatus(self, method: str, url: str, body: str, depth: str) -> list[_Response]:
        resp = await self.request(method, url, body=body,
                                  headers={"Depth": depth, "Content-Type": "application/xml; charset=utf-8"})
        try:
            root = ET.fromstring(resp.content)
        except ET.ParseError as exc:
            raise CalendarError(f"{method} {httpx.URL(url).path}: the server's answer is not valid XML ({exc})") \
                from None
        out = []
        for r in root.iter(_tag(DAV, "response")):
            href = r.findtext(_tag(DAV, "href"), "").strip()
            props: dict[str, ET.Element] = {}
            for ps in r.iter(_tag(DAV, "propstat")):
                if " 200 " in ps.findtext(_tag(DAV, "status"), "") + " ":
                    for prop in ps.iter(_tag(DAV, "prop")):
                        props.update({p.tag: p for p in prop})
            out.append(_Response(url=str(resp.url.join(href)), props=props))
        return out

    async def propfind(self, url: str, props: list[str], depth: int) -> list[_Response]:
        root = ET.Element(_tag(DAV, "propfind"))
        wanted = ET.SubElement(root, _tag(DAV, "prop"))
        for p in props:
            ET.SubElement(wanted, p)
        return await self._multistatus("PROPFIND", url, ET.tostring(root, encoding="unicode"), str(depth))

    async def _propfind_one(self, url: str, props: list[str]) -> _Response:
        found = await self.propfind(url, props, 0)
        if not found:
            raise CalendarError(f"PROPFIND {httpx.URL(url).path} on {self.where}: the server's answer is empty")
        return found[0]

    async def discover(self) -> list[CalendarInfo]:
        """The event calendars the configured URL leads to.

        The URL may be a calendar collection (that calendar alone), a principal or calendar home, or any
        URL that reports the user's principal (server root, /.well-known/caldav on most providers).
        """
        props = [RESOURCETYPE, DISPLAYNAME, COMPONENT_SET, CURRENT_USER_PRINCIPAL, CALENDAR_HOME_SET]
        here = await self._propfind_one(self.url, props)
        if here.is_event_calendar:
            return [self._info(here)]
        home = here.href(CALENDAR_HOME_SET, here.url)
        principal = here.href(CURRENT_USER_PRINCIPAL, here.url)
        if home is None and principal is not None:
            home = (await self._propfind_one(principal, [CALENDAR_HOME_SET])).href(CALENDAR_HOME_SET, principal)
        if home is None:
            raise CalendarNotFound(f"{httpx.URL(self.url).path} on {self.where} is neither a calendar nor leads "
                                   "to a calendar home (check the URL)")
        children = await self.propfind(home, [RESOURCETYPE, DISPLAYNAME, COMPONENT_SET], 1)
        calendars = [self._info(c) for c in children if c.is_event_calendar]
        log.info("caldav discovered server=%s calendars=%d", self.where, len(calendars))
        return sorted(calendars, key=lambda c: c.name.casefold())

    @staticmethod
    def _info(r: _Response) -> CalendarInfo:
        url = r.url if r.url.endswith("/") else r.url + "/"
        return CalendarInfo(url=url, name=r.text(DISPLAYNAME) or url.rstrip("/").rsplit("/", 1)[-1])

    async def query(self, calendar_url: str, *, start: datetime | None = None, end: datetime | None = None,
                    uid: str | None = None) -> list[Resource]:
        """REPORT calendar-query for the events overlapping [start, end), or carrying UID `uid`.

        The server returns whole resources (a recurring event once, with its rule); expanding the
        occurrences is the caller's job, so every server behaves the same.
        """
        root = ET.Element(_tag(CALDAV, "calendar-query"))
        prop = ET.SubElement(root, _tag(DAV, "prop"))
        ET.SubElement(prop, GETETAG)
        ET.SubElement(prop, CALENDAR_DATA)
        vcal = ET.SubElement(ET.SubElement(root, _tag(CALDAV, "filter")), _tag(CALDAV, "comp-filter"),
                             name="VCALENDAR")
        vevent = ET.SubElement(vcal, _tag(CALDAV, "comp-filter"), name="VEVENT")
        if start is not None and end is not None:
            ET.SubElement(vevent, _tag(CALDAV, "time-range"), start=_utc(start), end=_utc(end))
        if uid is not None:
            # text-match is a substring test; the caller compares the UID exactly.
            match = ET.SubElement(ET.SubElement(vevent, _tag(CALDAV, "prop-filter"), name="UID"),
                                  _tag(CALDAV, "text-match"), collation="i;octet")
            match.text = uid
        found = await self._multistatus("REPORT", calendar_url, ET.tostring(root, encoding="unicode"), "1")
        return [Resource(href=r.url, etag=r.text(GETETAG), data=r.text(CALENDAR_DATA))
                for r in found if r.text(CALENDAR_DATA)]

    async def get(self, href: str) -> Resource:
        resp = await self.request("GET", href, headers={"Accept": "text/calendar"})
        return Resource(href=str(resp.url), etag=resp.headers.get("ETag", ""), data=resp.text)

    async def put(self, href: str, data: str, *, etag: str | None) -> str:
        """Store `data` at `href`: a new resource when `etag` is None (If-None-Match: *), otherwise only
        if the resource is still at version `etag` (If-Match). Returns the new ETag, or "" when the
        server does not say (it may have rewritten the data)."""
        headers = {"Content-Type": "text/calendar; charset=utf-8"}
        headers.update({"If-None-Match": "*"} if etag is None else {"If-Match": etag})
        resp = await self.request("PUT", href, body=data, headers=headers)
        return resp.headers.get("ETag", "")

    async def delete(self, href: str, *, etag: str) -> None:
        """Delete `href` only if it is still at version `etag`."""
        await self.request("DELETE", href, headers={"If-Match": etag})


def _utc(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
