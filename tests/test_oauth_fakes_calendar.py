"""The calendar stand-ins: Google's CalDAV behind a bearer token (Radicale underneath) and Microsoft Graph's
calendars, driven with httpx as a client would, refusing what the providers refuse."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.support.google_caldav import GoogleCalDAV
from tests.support.graph_fake import GraphFake
from tests.support.oauth_provider import GOOGLE_CALENDAR, GOOGLE_MAIL, GRAPH_CALENDARS, OUTLOOK_IMAP, OAuthFake
from tests.support.oauth_provider import GRAPH_USER as GRAPH_USER_SCOPE
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


GRAPH_USER_ADDR = "graph-test@contoso.example"
SERIES = {"subject": "Team sync", "start": {"dateTime": "2025-03-03T10:00:00", "timeZone": "Europe/Berlin"},
          "end": {"dateTime": "2025-03-03T11:00:00", "timeZone": "Europe/Berlin"},
          "recurrence": {"pattern": {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                         "range": {"type": "numbered", "startDate": "2025-03-03", "numberOfOccurrences": 6}}}
HOLIDAY = {"subject": "Spring holiday", "isAllDay": True,
           "start": {"dateTime": "2025-03-21T00:00:00", "timeZone": "UTC"},
           "end": {"dateTime": "2025-03-22T00:00:00", "timeZone": "UTC"}}


def graph_token(oauth: OAuthFake, *scopes: str) -> dict[str, str]:
    token = oauth.issue("microsoft", list(scopes or [GRAPH_CALENDARS, GRAPH_USER_SCOPE]), user=GRAPH_USER_ADDR)
    return {"Authorization": f"Bearer {token.access_token}"}


def test_graph_calendar_view_expands_series_pages_and_honours_the_zone(oauth: OAuthFake, graph: GraphFake,
                                                                       http: httpx.Client) -> None:
    auth = graph_token(oauth)
    me = http.get(f"{graph.url}/me", headers=auth).json()
    assert me["mail"] == GRAPH_USER_ADDR
    work = graph.add_calendar(GRAPH_USER_ADDR, "Series test")
    graph.add_event(GRAPH_USER_ADDR, SERIES, work)
    graph.add_event(GRAPH_USER_ADDR, HOLIDAY, work)
    calendars = http.get(f"{graph.url}/me/calendars", headers=auth).json()["value"]
    assert {c["name"] for c in calendars} >= {"Calendar", "Series test"}

    url = f"{graph.url}/me/calendars/{work}/calendarView"
    window = {"startDateTime": "2025-03-01T00:00:00Z", "endDateTime": "2025-04-30T00:00:00Z", "$top": "4"}
    first = http.get(url, params=window, headers={**auth, "Prefer": 'outlook.timezone="Europe/Berlin"'})
    assert first.headers["preference-applied"] == 'outlook.timezone="Europe/Berlin"'
    page = first.json()
    items = page["value"]
    while "@odata.nextLink" in page:  # a client must follow the pages
        page = http.get(page["@odata.nextLink"], headers={**auth, "Prefer": 'outlook.timezone="Europe/Berlin"'}).json()
        items += page["value"]
    syncs = [e for e in items if e["subject"] == "Team sync"]
    assert len(syncs) == 6 and {e["type"] for e in syncs} == {"occurrence"}
    assert {e["start"]["dateTime"][11:16] for e in syncs} == {"10:00"}  # wall time across the DST switch
    holiday = next(e for e in items if e["subject"] == "Spring holiday")
    assert holiday["isAllDay"] and holiday["start"]["dateTime"].startswith("2025-03-21T00:00:00")

    in_utc = http.get(url, params=window | {"$top": "50"}, headers=auth).json()["value"]
    times = [e["start"]["dateTime"][11:16] for e in in_utc if e["subject"] == "Team sync"]
    assert times[0] == "09:00" and times[-1] == "08:00"  # Berlin is UTC+1, then UTC+2 from 30 March
    missing = http.get(url, headers=auth)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "ErrorInvalidParameter"


def test_graph_events_carry_etags_and_a_stale_if_match_is_refused(oauth: OAuthFake, graph: GraphFake,
                                                                  http: httpx.Client) -> None:
    auth = graph_token(oauth)
    body = {"subject": "Dentist", "start": {"dateTime": "2025-03-12T15:00:00", "timeZone": "Europe/Berlin"},
            "end": {"dateTime": "2025-03-12T15:45:00", "timeZone": "Europe/Berlin"}}
    created = http.post(f"{graph.url}/me/events", json=body | {"transactionId": "t-dentist"}, headers=auth)
    assert created.status_code == 201
    event = created.json()
    retried = http.post(f"{graph.url}/me/events", json=body | {"transactionId": "t-dentist"}, headers=auth)
    assert retried.json()["id"] == event["id"]  # the same transactionId: no twin
    url, etag = f"{graph.url}/me/events/{event['id']}", event["@odata.etag"]

    moved = http.patch(url, json={"subject": "Dentist (moved)"}, headers={**auth, "If-Match": etag})
    assert moved.status_code == 200 and moved.json()["@odata.etag"] != etag
    stale = http.patch(url, json={"subject": "Overwrite"}, headers={**auth, "If-Match": etag})
    assert stale.status_code == 412 and stale.json()["error"]["code"] == "ErrorIrresolvableConflict"
    newer = graph.change_elsewhere(GRAPH_USER_ADDR, event["id"], subject="Changed on the phone")
    assert http.delete(url, headers={**auth, "If-Match": moved.json()["@odata.etag"]}).status_code == 412
    assert http.get(url, headers=auth).json()["subject"] == "Changed on the phone"
    assert http.delete(url, headers={**auth, "If-Match": newer}).status_code == 204
    assert http.get(url, headers=auth).status_code == 404


def test_graph_refuses_tokens_that_are_not_live_graph_tokens(oauth: OAuthFake, graph: GraphFake,
                                                            http: httpx.Client) -> None:
    url = f"{graph.url}/me/calendars"
    assert http.get(url).status_code == 401
    outlook = oauth.issue("microsoft", [OUTLOOK_IMAP], user=GRAPH_USER_ADDR).access_token
    refused = http.get(url, headers={"Authorization": f"Bearer {outlook}"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "InvalidAuthenticationToken"
    read_only = graph_token(oauth, GRAPH_USER_SCOPE)
    assert http.post(f"{graph.url}/me/events", json=HOLIDAY, headers=read_only).status_code == 403
    auth = graph_token(oauth)
    oauth.expire_access_tokens()
    assert http.get(url, headers=auth).status_code == 401
    assert [status for *_, status in graph.requests] == [401, 401, 403, 401]
