"""The calendar stand-ins: Google's CalDAV behind a bearer token (Radicale underneath) and Microsoft Graph's
calendars, driven with httpx as a client would, refusing what the providers refuse."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.support.google_caldav import GoogleCalDAV
from tests.support.oauth_provider import GOOGLE_CALENDAR, GOOGLE_MAIL, OAuthFake
from tests.support.tls_ca import FakeCA

CAL_USER = "calendar-test@gmail.example"
ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//Other client//EN\r
BEGIN:VEVENT\r
UID:{uid}\r
DTSTAMP:20250101T000000Z\r
DTSTART:20250310T090000Z\r
DTEND:20250310T100000Z\r
SUMMARY:{summary}\r
END:VEVENT\r
END:VCALENDAR\r
"""


@pytest.fixture
def http(fake_ca: FakeCA) -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def propfind(http: httpx.Client, url: str, token: str, prop: str, depth: str = "0") -> ET.Element:
    body = f'<d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:prop>{prop}</d:prop></d:propfind>'
    resp = http.request("PROPFIND", url, content=body, headers={"Authorization": f"Bearer {token}", "Depth": depth})
    assert resp.status_code == 207, (resp.status_code, resp.text)
    return ET.fromstring(resp.content)


def test_google_caldav_discovers_the_signed_in_users_calendars(oauth: OAuthFake, google_caldav: GoogleCalDAV,
                                                               http: httpx.Client) -> None:
    token = oauth.issue("google", [GOOGLE_CALENDAR], user=CAL_USER).access_token
    root = propfind(http, google_caldav.url, token, "<d:current-user-principal/>")
    principal = root.findtext(".//{DAV:}current-user-principal/{DAV:}href")
    assert principal == f"/caldav/v2/{quote(CAL_USER, safe='')}/"
    home = propfind(http, google_caldav.url.rstrip("/").rsplit("/caldav", 1)[0] + principal, token,
                    "<c:calendar-home-set/>").findtext(".//{urn:ietf:params:xml:ns:caldav}calendar-home-set/{DAV:}href")
    work = google_caldav.add_calendar(CAL_USER, "Work")
    listing = propfind(http, google_caldav.url.rsplit("/caldav", 1)[0] + str(home), token,
                       "<d:displayname/><d:resourcetype/>", depth="1")
    names = {r.findtext("{DAV:}href"): r.findtext(".//{DAV:}displayname") for r in listing.iter("{DAV:}response")}
    primary = urlsplit(google_caldav.calendar_url(CAL_USER)).path
    assert names[primary] == CAL_USER  # the primary calendar, named by the address
    assert "Work" in names.values()

    google_caldav.put_event(work, "lunch", ICS.format(uid="lunch", summary="Lunch"))
    got = http.get(f"{work}lunch.ics", headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200 and "SUMMARY:Lunch" in got.text and got.headers["etag"]
    put = http.put(google_caldav.calendar_url(CAL_USER) + "new.ics", content=ICS.format(uid="new", summary="New"),
                   headers={"Authorization": f"Bearer {token}", "Content-Type": "text/calendar"})
    assert put.status_code == 201


def test_google_caldav_refuses_missing_dead_and_wrong_tokens(oauth: OAuthFake, google_caldav: GoogleCalDAV,
                                                             http: httpx.Client) -> None:
    url = google_caldav.calendar_url(CAL_USER)
    assert http.request("PROPFIND", url).status_code == 401
    mail_only = oauth.issue("google", [GOOGLE_MAIL], user=CAL_USER).access_token
    refused = http.request("PROPFIND", url, headers={"Authorization": f"Bearer {mail_only}"})
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    token = oauth.issue("google", [GOOGLE_CALENDAR], user=CAL_USER).access_token
    oauth.expire_access_tokens()
    assert http.request("PROPFIND", url, headers={"Authorization": f"Bearer {token}"}).status_code == 401
    stranger = oauth.issue("google", [GOOGLE_CALENDAR], user="stranger@gmail.example").access_token
    assert http.request("PROPFIND", url, headers={"Authorization": f"Bearer {stranger}", "Depth": "1"}
                        ).status_code in {403, 404}
    assert [status for *_, status in google_caldav.requests][:3] == [401, 401, 401]
