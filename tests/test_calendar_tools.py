"""The calendar toolset's handlers and previews, through a RecordingContext, against Radicale."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import pytest_asyncio

from connectors.calendar import CalendarClient, CalendarSettings
from store.db import Store
from tests.fixtures.caldav import CalDAVServer, seed_ics
from tests.support.context import RecordingContext
from toolsets import calendar as cal_tools
from toolsets.base import ExecutionPolicy, Preview, Tool, ToolError

BERLIN = ZoneInfo("Europe/Berlin")


def settings(server: CalDAVServer, url: str) -> CalendarSettings:
    return CalendarSettings(url=url, username=server.username, password=server.password)


@pytest_asyncio.fixture(loop_scope="function")
async def client(caldav_server: CalDAVServer, fresh_calendar: str) -> AsyncIterator[CalendarClient]:
    async with CalendarClient(settings(caldav_server, fresh_calendar)) as c:
        yield c


def context(store: Store, client: CalendarClient | None, tz: str = "Europe/Berlin") -> RecordingContext:
    return RecordingContext(store=store, tz=ZoneInfo(tz), services={"calendar": client} if client else {})


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    """Validate the arguments the way the runtime does (from JSON-like values), then run the handler."""
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def preview(tool: Tool, ctx: RecordingContext, **args: Any) -> Preview:
    assert tool.previewer is not None
    return await tool.previewer(ctx, tool.args_model.model_validate(args))


async def version_of(client: CalendarClient, uid: str) -> str:
    return (await client.get_event(uid)).version


def test_the_toolset_declares_its_tools_and_policies() -> None:
    tools = {t.name: t for t in cal_tools.TOOLSET.tools}
    assert list(tools) == ["calendar_status", "calendar_list", "calendar_get", "calendar_draft",
                           "calendar_create", "calendar_update", "calendar_cancel"]
    for name, tool in tools.items():
        mutates = name in ("calendar_create", "calendar_update", "calendar_cancel")
        assert tool.descriptor.execution is (ExecutionPolicy.CONFIRM if mutates else ExecutionPolicy.DIRECT)
        assert (tool.previewer is not None) is mutates
    assert cal_tools.TOOLSET.requires == "calendar"


@pytest.mark.parametrize("name, args", [
    ("calendar_status", {}), ("calendar_list", {"start": "2025-03-01", "end": "2025-03-02"}),
    ("calendar_get", {"event_id": "dentist"}), ("calendar_draft", {"title": "x", "start": "2025-03-01"}),
    ("calendar_create", {"title": "x", "start": "2025-03-01"}),
    ("calendar_update", {"event_id": "dentist", "version": "v", "title": "y"}),
    ("calendar_cancel", {"event_id": "dentist", "version": "v"}),
])
async def test_without_a_calendar_every_tool_says_so(store: Store, name: str, args: dict[str, Any]) -> None:
    tool = next(t for t in cal_tools.TOOLSET.tools if t.name == name)
    with pytest.raises(ToolError, match="calendar is not configured"):
        await call(tool, context(store, None), **args)


async def test_status_names_the_calendars(store: Store, client: CalendarClient) -> None:
    text = await call(cal_tools.calendar_status, context(store, client))
    assert "user owner: working" in text and "(new events go here)" in text and "Scratch" in text


async def test_status_reports_a_server_that_is_down(store: Store, caldav_server: CalDAVServer,
                                                    caldav_down_url: str) -> None:
    async with CalendarClient(settings(caldav_server, caldav_down_url)) as down:
        text = await call(cal_tools.calendar_status, context(store, down))
    assert "not working: cannot reach the calendar server" in text


async def test_list_shows_every_time_in_the_owners_zone(store: Store, client: CalendarClient) -> None:
    text = await call(cal_tools.calendar_list, context(store, client), start="2025-03-01", end="2025-04-30")
    assert text.startswith("9 events from Sat 01 Mar 2025 00:00 to Thu 01 May 2025 00:00 (Europe/Berlin):")
    for line in ["Mon 03 Mar 2025 10:00–11:00 CET  Team sync (repeats)",
                 "Mon 31 Mar 2025 10:00–11:00 CEST  Team sync (repeats)",
                 "Wed 12 Mar 2025 15:00–15:45 CET  Dentist @ Dr. Weiss, Hauptstr. 5",
                 "Fri 21 Mar 2025 (all day)  Spring holiday",
                 "Sat 29 Mar 2025 23:30 CET – Sun 30 Mar 2025 04:30 CEST  Night train"]:
        assert f"- {line} [" in text
    version = await version_of(client, "dentist")
    assert "Dentist @ Dr. Weiss, Hauptstr. 5 [Scratch" in text and f"id=dentist version={version}" in text


async def test_list_in_another_zone_moves_times_but_not_all_day_dates(store: Store, client: CalendarClient) -> None:
    ctx = context(store, client, "America/New_York")  # its DST starts on 9 March, Berlin's on 30 March
    text = await call(cal_tools.calendar_list, ctx, start="2025-03-01", end="2025-04-30")
    assert "- Mon 03 Mar 2025 04:00–05:00 EST  Team sync" in text
    assert "- Mon 10 Mar 2025 05:00–06:00 EDT  Team sync" in text
    assert "- Mon 31 Mar 2025 04:00–05:00 EDT  Team sync" in text
    assert "- Sat 29 Mar 2025 18:30–22:30 EDT  Night train" in text
    assert "- Fri 21 Mar 2025 (all day)  Spring holiday" in text


async def test_a_day_range_covers_that_whole_day(store: Store, client: CalendarClient) -> None:
    text = await call(cal_tools.calendar_list, context(store, client), start="2025-03-12", end="2025-03-12")
    assert text.splitlines()[0] == "1 event from Wed 12 Mar 2025 00:00 to Thu 13 Mar 2025 00:00 (Europe/Berlin):"
    assert text.splitlines()[1].startswith('<untrusted source="calendar events from Wed 12 Mar 2025')
    assert "Dentist" in text.splitlines()[2]


@pytest.mark.parametrize("args, problem", [
    ({"start": "2025-03-12T10:00", "end": "2025-03-12T09:00"}, "is not after start"),
    ({"start": "2025-01-01", "end": "2026-06-01"}, "at most one year"),
    ({"start": "2025-03-01", "end": "2025-03-02", "calendar": "Work"}, "no calendar called 'Work'"),
])
async def test_list_refuses_bad_ranges(store: Store, client: CalendarClient, args: dict[str, Any],
                                       problem: str) -> None:
    with pytest.raises(ToolError, match=problem):
        await call(cal_tools.calendar_list, context(store, client), **args)


async def test_get_shows_the_whole_event(store: Store, client: CalendarClient) -> None:
    ctx = context(store, client)
    text = await call(cal_tools.calendar_get, ctx, event_id="team-sync")
    version = await version_of(client, "team-sync")
    assert text.splitlines()[0] == f"id=team-sync version={version}"
    # invitations are outside text
    assert text.splitlines()[1].startswith('<untrusted source="calendar event team-sync"')
    assert ctx.external_sources == ["calendar event team-sync"]
    assert "  when: Mon 03 Mar 2025 10:00–11:00 CET" in text
    assert "  attendees: alice@example.com, bob@example.com" in text
    assert "  repeats: FREQ=WEEKLY;COUNT=6;BYDAY=MO" in text


async def test_get_of_an_unknown_id_is_a_tool_error(store: Store, client: CalendarClient) -> None:
    with pytest.raises(ToolError, match="no event with id 'nope'"):
        await call(cal_tools.calendar_get, context(store, client), event_id="nope")


async def test_draft_of_a_new_event_saves_nothing(store: Store, caldav_server: CalDAVServer,
                                                  fresh_calendar: str, client: CalendarClient) -> None:
    before = caldav_server.etags(fresh_calendar)
    text = await call(cal_tools.calendar_draft, context(store, client), title="Lunch with Ana",
                      start="2025-04-03T12:30", end="2025-04-03T13:30", attendees=["ana@example.com"])
    assert text.startswith("Draft only, nothing saved.\nCreate an event in Scratch")
    assert "  when: Thu 03 Apr 2025 12:30–13:30 CEST" in text and "  attendees: ana@example.com" in text
    assert caldav_server.etags(fresh_calendar) == before


async def test_draft_of_a_change_shows_before_and_after(store: Store, caldav_server: CalDAVServer,
                                                        fresh_calendar: str, client: CalendarClient) -> None:
    before = caldav_server.etags(fresh_calendar)
    text = await call(cal_tools.calendar_draft, context(store, client), event_id="dentist",
                      start="2025-03-12T16:30")
    assert "  when: Wed 12 Mar 2025 15:00–15:45 CET -> Wed 12 Mar 2025 16:30–17:15 CET" in text
    assert "location" not in text and f"version={await version_of(client, 'dentist')}" in text
    assert '<untrusted source="calendar event dentist"' in text  # the event as the server has it
    assert caldav_server.etags(fresh_calendar) == before


@pytest.mark.parametrize("args, problem", [
    ({"title": "x", "start": "2025-04-03T12:30", "end": "2025-04-03T11:30"}, "must be after the start"),
    ({"title": "x", "start": "2025-04-03", "repeat": "every monday"}, "has no FREQ"),
    ({"event_id": "nope", "title": "x"}, "no event with id 'nope'"),
    ({"event_id": "dentist", "title": "Dentist"}, "nothing would change"),
    ({"start": "2025-04-03"}, "needs a title"),
])
async def test_draft_refuses_bad_input(store: Store, client: CalendarClient, args: dict[str, Any],
                                       problem: str) -> None:
    with pytest.raises(ToolError, match=problem):
        await call(cal_tools.calendar_draft, context(store, client), **args)


async def test_create_previews_then_adds_exactly_that_event(store: Store, caldav_server: CalDAVServer,
                                                            fresh_calendar: str, client: CalendarClient) -> None:
    ctx = context(store, client)
    args = {"title": "Board meeting", "start": "2025-10-26T01:30", "end": "2025-10-26T03:30",
            "location": "HQ", "attendees": ["ceo@example.com"]}
    shown = await preview(cal_tools.calendar_create, ctx, **args)
    # 26 October: Berlin's clocks go back at 03:00, so two wall-clock hours last three real ones.
    assert "  when: Sun 26 Oct 2025 01:30 CEST–03:30 CET" in shown.text
    assert "  location: HQ" in shown.text and "  attendees: ceo@example.com" in shown.text
    assert shown.payload["href"].startswith(fresh_calendar) and shown.payload["etag"] is None
    assert "SUMMARY:Board meeting" in shown.payload["source"]
    before = caldav_server.etags(fresh_calendar)
    result = await call(cal_tools.calendar_create, ctx, **args)
    after = caldav_server.etags(fresh_calendar)
    added = set(after) - set(before)
    assert len(added) == 1 and {h: after[h] for h in before} == before
    event = await client.get_event_at(added.pop())
    # Approving that preview writes exactly its event, and only where none exists yet: a second run of
    # the same approved write is refused instead of creating a twin.
    assert cal_tools.calendar_create.effector is not None
    await cal_tools.calendar_create.effector(ctx, None, shown.payload)  # type: ignore[arg-type]
    shown_uid = shown.payload["uid"]
    assert (await client.get_event(shown_uid)).summary == "Board meeting"
    with pytest.raises(ToolError):
        await cal_tools.calendar_create.effector(ctx, None, shown.payload)  # type: ignore[arg-type]
    assert len(set(caldav_server.etags(fresh_calendar)) - set(before)) == 2
    assert result.startswith(f"Created id={event.uid} version={event.version}")
    assert (event.summary, event.location, event.attendees) == ("Board meeting", "HQ", ("ceo@example.com",))
    assert event.start == datetime(2025, 10, 26, 1, 30, tzinfo=BERLIN) and event.start.tzinfo == BERLIN
    assert event.end - event.start == timedelta(hours=2) and event.end.utcoffset() == timedelta(hours=1)


async def test_create_all_day(store: Store, client: CalendarClient) -> None:
    result = await call(cal_tools.calendar_create, context(store, client), title="Off", start="2025-05-01",
                        end="2025-05-02")
    assert "  when: Thu 01 May 2025 – Fri 02 May 2025 (all day)" in result


async def test_update_previews_before_and_after_then_changes_only_that(
        store: Store, caldav_server: CalDAVServer, fresh_calendar: str, client: CalendarClient) -> None:
    ctx = context(store, client)
    old = await client.get_event("dentist")
    args = {"event_id": "dentist", "version": old.version, "start": "2025-03-12T16:30", "title": "Dentist (check-up)"}
    shown = await preview(cal_tools.calendar_update, ctx, **args)
    assert shown.text.splitlines() == [
        'Change "Dentist" (Wed 12 Mar 2025 15:00–15:45 CET) in ' + old.calendar + ":",
        "  title: Dentist -> Dentist (check-up)",
        "  when: Wed 12 Mar 2025 15:00–15:45 CET -> Wed 12 Mar 2025 16:30–17:15 CET"]
    assert (shown.payload["href"], shown.payload["etag"]) == (old.href, old.etag)
    assert "SUMMARY:Dentist (check-up)" in shown.payload["source"]
    before = caldav_server.etags(fresh_calendar)
    result = await call(cal_tools.calendar_update, ctx, **args)
    after = caldav_server.etags(fresh_calendar)
    assert [h for h in before if before[h] != after[h]] == [old.href.removeprefix(caldav_server.url.rstrip("/"))]
    new = await client.get_event("dentist")
    assert (new.summary, new.start, new.end) == ("Dentist (check-up)", datetime(2025, 3, 12, 16, 30, tzinfo=BERLIN),
                                                 datetime(2025, 3, 12, 17, 15, tzinfo=BERLIN))
    assert (new.location, new.description, new.attendees) == (old.location, old.description, old.attendees)
    assert result.startswith(f"Updated id=dentist version={new.version}:\n  title: Dentist -> Dentist (check-up)")


async def test_cancel_previews_then_deletes_only_that_event(
        store: Store, caldav_server: CalDAVServer, fresh_calendar: str, client: CalendarClient) -> None:
    ctx = context(store, client)
    sync = await client.get_event("team-sync")
    shown = await preview(cal_tools.calendar_cancel, ctx, event_id="team-sync", version=sync.version)
    assert shown.text.startswith("Cancel (delete) this event:\n  title: Team sync\n"
                                 "  when: Mon 03 Mar 2025 10:00–11:00 CET")
    assert (shown.payload["href"], shown.payload["etag"]) == (sync.href, sync.etag)
    before = caldav_server.etags(fresh_calendar)
    result = await call(cal_tools.calendar_cancel, ctx, event_id="team-sync", version=sync.version)
    after = caldav_server.etags(fresh_calendar)
    assert result == 'Cancelled "Team sync" (Mon 03 Mar 2025 10:00–11:00 CET).'
    assert set(before) - set(after) == {sync.href.removeprefix(caldav_server.url.rstrip("/"))}
    assert {h: before[h] for h in after} == after


@pytest.mark.parametrize("tool, changes", [(cal_tools.calendar_update, {"title": "Dentist (moved)"}),
                                           (cal_tools.calendar_cancel, {})])
async def test_an_event_changed_after_the_preview_is_refused(
        store: Store, caldav_server: CalDAVServer, fresh_calendar: str, client: CalendarClient,
        tool: Tool, changes: dict[str, Any]) -> None:
    ctx = context(store, client)
    args = {"event_id": "dentist", "version": await version_of(client, "dentist"), **changes}
    at_prompt = await preview(tool, ctx, **args)
    # Someone else moves the appointment on another device after the owner was asked.
    moved = seed_ics("dentist", "SUMMARY:Dentist\nDTSTART;TZID=Europe/Berlin:20250313T090000\n"
                                "DTEND;TZID=Europe/Berlin:20250313T094500")
    with caldav_server.http() as http:
        http.put(f"{fresh_calendar}dentist.ics", content=moved).raise_for_status()
    changed = caldav_server.etags(fresh_calendar)
    at_execution = await preview(tool, ctx, **args)
    assert at_execution.payload["etag"] != at_prompt.payload["etag"]
    assert tool.effector is not None
    with pytest.raises(ToolError, match=r"^the event changed on the server since you approved; nothing was changed$"):
        await tool.effector(ctx, None, at_prompt.payload)  # type: ignore[arg-type]
    assert "Warning: the event changed on the server" in at_execution.text
    with pytest.raises(ToolError, match=r"^the event changed on the server since you approved; nothing was changed$"):
        await call(tool, ctx, **args)
    assert caldav_server.etags(fresh_calendar) == changed
    assert (await client.get_event("dentist")).start == datetime(2025, 3, 13, 9, tzinfo=BERLIN)


async def test_update_without_any_field_is_refused(store: Store, client: CalendarClient) -> None:
    version = await version_of(client, "spring-holiday")
    with pytest.raises(ToolError, match="nothing would change"):
        await preview(cal_tools.calendar_update, context(store, client), event_id="spring-holiday", version=version)
    assert (await client.get_event("spring-holiday")).start == date(2025, 3, 21)
