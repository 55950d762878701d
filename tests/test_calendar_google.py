"""Google Calendar over CalDAV with the account's bearer token (issue 37, item 5), against Radicale behind
Google's bearer check at Google's path shape (tests/support/google_caldav.py): calendars discovered for the
signed-in address, recurring events expanded, all-day events as dates, times in the owner's zone, writes
after approval with If-Match so a change made elsewhere in between is refused, no token-endpoint call
while the token is valid, and a dead sign-in answering one line."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from connectors.calendar import CalendarClient, CalendarSettings
from gateway.config import parse_config
from gateway.services.accounts import account_services
from store.db import Store
from tests.support.account_signin import SECRET_ENV
from tests.support.context import RecordingContext
from tests.support.google_caldav import GoogleCalDAV
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_provider import GOOGLE_CALENDAR, GOOGLE_CLIENT_SECRET, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.calendar import CONFLICT, calendar_create, calendar_get, calendar_list, calendar_status, calendar_update

WEEKLY = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Google Inc//Google Calendar 70.9054//EN
BEGIN:VEVENT
UID:{uid}
DTSTART;TZID=Europe/Berlin:20261201T090000
DTEND;TZID=Europe/Berlin:20261201T093000
RRULE:FREQ=WEEKLY;BYDAY=TU
SUMMARY:Team stand-up
END:VEVENT
END:VCALENDAR
"""
ALL_DAY = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Google Inc//Google Calendar 70.9054//EN
BEGIN:VEVENT
UID:{uid}
DTSTART;VALUE=DATE:20261210
DTEND;VALUE=DATE:20261212
SUMMARY:Offsite
END:VEVENT
END:VCALENDAR
"""


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def approve(tool: Tool, ctx: RecordingContext, **args: Any) -> tuple[str, str]:
    parsed = tool.args_model.model_validate(args)
    assert tool.previewer is not None and tool.effector is not None
    shown = await tool.previewer(ctx, parsed)
    return shown.text, str(await tool.effector(ctx, parsed, shown.payload))


@pytest.fixture
async def google(tmp_path: Path, store: Store, oauth: OAuthFake, google_caldav: GoogleCalDAV, fake_ca: FakeCA,
                 monkeypatch: pytest.MonkeyPatch) -> Any:
    """A context whose only calendar account is a Google one of a user of its own (the fake's data lives
    for the session), signed in; yields (ctx, user)."""
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)
    user = f"cal-{uuid.uuid4().hex[:8]}@gmail.example"
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")}, "accounts": {
        "personal": account("google", oauth, services=["calendar"], caldav_url=google_caldav.url)}})
    cfg.data_dir = tmp_path / "data"
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "personal", "google", user)
    ctx = RecordingContext(store=store, services=services, tz=ZoneInfo("Europe/Berlin"))
    yield ctx, user
    await services["calendar"].aclose()


async def test_reads_the_signed_in_users_calendars_with_repeats_expanded_and_all_day_as_dates(
        google: Any, google_caldav: GoogleCalDAV, oauth: OAuthFake) -> None:
    ctx, user = google
    status = await call(calendar_status, ctx)  # the user's first request: the fake makes their calendar
    assert status.startswith(f"Calendar server {oauth.base_url}, user {user}: working. Calendars:\n- {user}")
    await asyncio.to_thread(google_caldav.put_event, google_caldav.calendar_url(user), "standup",
                            WEEKLY.format(uid="standup"))
    await asyncio.to_thread(google_caldav.put_event, google_caldav.calendar_url(user), "offsite",
                            ALL_DAY.format(uid="offsite"))
    listed = await call(calendar_list, ctx, start="2026-12-01", end="2026-12-22")
    assert listed.startswith("5 events from Tue 01 Dec 2026 00:00 to Wed 23 Dec 2026 00:00 (Europe/Berlin)")
    assert listed.count("Team stand-up (repeats)") == 4
    assert "Tue 08 Dec 2026 09:00–09:30 CET  Team stand-up" in listed
    assert "Thu 10 Dec 2026 – Fri 11 Dec 2026 (all day)  Offsite" in listed
    assert all(status == 207 for method, _, status in google_caldav.requests if method == "REPORT")
    assert oauth.calls["google.token"] == 0  # the stored token served every request


async def test_creates_after_approval_and_refuses_to_overwrite_a_change_made_elsewhere(
        google: Any, google_caldav: GoogleCalDAV, oauth: OAuthFake) -> None:
    ctx, user = google
    shown, created = await approve(calendar_create, ctx, title="Dentist", start="2026-12-15T10:00",
                                   end="2026-12-15T11:00", location="Main St 1")
    assert shown.startswith(f"Create an event in {user}:\n  title: Dentist\n  when: Tue 15 Dec 2026 10:00–11:00 CET")
    found = re.search(r"id=(\S+) version=(\w+)", created)
    assert found, created
    event_id, version = found.groups()
    assert "location: Main St 1" in await call(calendar_get, ctx, event_id=event_id)
    # The owner approves a move; before it runs, someone edits the event in Google Calendar.
    parsed = calendar_update.args_model.model_validate({"event_id": event_id, "version": version,
                                                        "start": "2026-12-15T12:00"})
    assert calendar_update.previewer is not None and calendar_update.effector is not None
    payload = (await calendar_update.previewer(ctx, parsed)).payload
    event = await ctx.services["calendar"].pick(None)
    source = (await event[1].get_event(event_id)).source.replace("Main St 1", "Main St 9")
    await asyncio.to_thread(google_caldav.put_event, google_caldav.calendar_url(user), event_id, source)
    with pytest.raises(ToolError, match=CONFLICT):
        await calendar_update.effector(ctx, parsed, payload)
    assert "Main St 9" in await call(calendar_get, ctx, event_id=event_id)
    assert any(m == "PUT" and s == 412 for m, _, s in google_caldav.requests)


async def test_a_refused_bearer_token_is_asked_for_once_more_then_a_revoked_account_is_one_line(
        google: Any, google_caldav: GoogleCalDAV, oauth: OAuthFake) -> None:
    ctx, user = google
    live = oauth.issue("google", [GOOGLE_CALENDAR], user=user).access_token
    handed: list[str] = []

    async def token(refused: str | None = None) -> str:
        handed.append(live if refused == "ya29.stale" else "ya29.stale")
        return handed[-1]

    async with CalendarClient(CalendarSettings(url=google_caldav.url, username=user, default_calendar="", timeout=10),
                              token=token) as client:
        assert [c.name for c in await client.calendars()] == [user]
    # One 401 (the stale token), the provider asked once more, the same request repeated with the new token.
    assert [s for _, _, s in google_caldav.requests[:2]] == [401, 207] and handed[:2] == ["ya29.stale", live]

    oauth.access_lifetime = 60  # the next sign-in's tokens are inside the refresh margin at once
    await signed_in(ctx.services["accounts"], oauth, "personal", "google", user)
    oauth.revoke(user)
    with pytest.raises(ToolError) as err:
        await call(calendar_list, ctx, start="2026-12-01", end="2026-12-02")
    assert str(err.value) == ("account 'personal' needs signing in again (its provider refused the sign-in: access "
                              "revoked or expired): run `anyy accounts add personal`")
    assert (await call(calendar_status, ctx)).startswith("account 'personal' needs signing in again")
