"""Microsoft calendars over Graph (issue 37, item 5): the seven calendar tools on `connectors.graph_calendar`
against the Graph fake (tests/support/graph_fake.py), with a Graph token the account gets from its refresh
token at first use. Recurring events expanded (calendarView), all-day events as dates, times in the owner's
zone, writes after approval with If-Match on the event's etag so a change made elsewhere is refused (412),
repeat rules Outlook cannot hold refused with the reason, no token-endpoint call while the token is valid."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from connectors.graph_recurrence import from_graph, to_graph
from connectors.ical import InvalidEvent
from gateway.automations.event_plan import EventPlanner
from gateway.config import parse_config
from gateway.services.accounts import account_services
from store.db import Store
from store.records import AutomationRecord, Origin
from tests.support.context import RecordingContext
from tests.support.graph_fake import GraphFake
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_provider import OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.calendar import (
    CONFLICT,
    calendar_cancel,
    calendar_create,
    calendar_get,
    calendar_list,
    calendar_status,
    calendar_update,
)
from toolsets.schedule import parse_schedule

STANDUP = {"subject": "Stand-up", "start": {"dateTime": "2026-12-01T09:00:00", "timeZone": "W. Europe Standard Time"},
           "end": {"dateTime": "2026-12-01T09:15:00", "timeZone": "W. Europe Standard Time"},
           "recurrence": {"pattern": {"type": "weekly", "interval": 1, "daysOfWeek": ["tuesday", "thursday"]},
                          "range": {"type": "noEnd", "startDate": "2026-12-01"}}}
HOLIDAY = {"subject": "Company holiday", "isAllDay": True, "start": {"dateTime": "2026-12-24T00:00:00",
           "timeZone": "UTC"}, "end": {"dateTime": "2026-12-26T00:00:00", "timeZone": "UTC"}}


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def approve(tool: Tool, ctx: RecordingContext, **args: Any) -> tuple[str, str]:
    parsed = tool.args_model.model_validate(args)
    assert tool.previewer is not None and tool.effector is not None
    shown = await tool.previewer(ctx, parsed)
    return shown.text, str(await tool.effector(ctx, parsed, shown.payload))


@pytest.fixture
async def work(tmp_path: Path, store: Store, oauth: OAuthFake, graph: GraphFake, fake_ca: FakeCA,
               monkeypatch: pytest.MonkeyPatch) -> Any:
    """A context whose calendar account is a Microsoft one of a user of its own, signed in; (ctx, user)."""
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    user = f"cal-{uuid.uuid4().hex[:8]}@contoso.example"
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")}, "accounts": {
        "work": account("microsoft", oauth, services=["calendar"], graph_url=graph.url)}})
    cfg.data_dir = tmp_path / "data"
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "work", "microsoft", user)
    ctx = RecordingContext(store=store, services=services, tz=ZoneInfo("Europe/Berlin"))
    yield ctx, user
    await services["calendar"].aclose()


async def test_lists_series_expanded_and_all_day_events_as_dates_in_the_owners_zone(
        work: Any, graph: GraphFake, oauth: OAuthFake) -> None:
    ctx, user = work
    graph.add_event(user, STANDUP)
    graph.add_event(user, HOLIDAY)
    status = await call(calendar_status, ctx)
    assert status.startswith(f"Calendar server {oauth.base_url}, user {user}: working. Calendars:\n- Calendar "
                             "(new events go here)")
    listed = await call(calendar_list, ctx, start="2026-12-01", end="2026-12-31")
    assert listed.startswith("11 events from Tue 01 Dec 2026 00:00 to Fri 01 Jan 2027 00:00 (Europe/Berlin)")
    assert listed.count("Stand-up (repeats)") == 10
    assert "Thu 03 Dec 2026 09:00–09:15 CET  Stand-up (repeats) [Calendar]" in listed
    assert "Thu 24 Dec 2026 – Fri 25 Dec 2026 (all day)  Company holiday" in listed
    # Every occurrence names its series, so a change applies to the series as a whole.
    assert len(set(re.findall(r"Stand-up \(repeats\) \[Calendar\] (id=\S+ version=\w+)", listed))) == 1
    # The Graph token came from the refresh token once; every later request used it.
    assert oauth.calls["microsoft.token"] == 1
    await call(calendar_list, ctx, start="2026-12-01", end="2026-12-02")
    assert oauth.calls["microsoft.token"] == 1


async def test_creates_changes_and_cancels_after_approval(work: Any, graph: GraphFake) -> None:
    ctx, user = work
    shown, created = await approve(calendar_create, ctx, title="Review", start="2026-12-09T14:00",
                                   end="2026-12-09T15:00", attendees=["ann@contoso.example"])
    assert shown.startswith("Create an event in Calendar:\n  title: Review\n  when: Wed 09 Dec 2026 14:00–15:00 CET")
    (stored,) = graph.events(user)
    assert stored["subject"] == "Review" and stored["start"]["dateTime"].startswith("2026-12-09T13:00:00")
    assert [a["emailAddress"]["address"] for a in stored["attendees"]] == ["ann@contoso.example"]
    event_id, version = re.search(r"id=(\S+) version=(\w+)", created).groups()  # type: ignore[union-attr]
    shown, updated = await approve(calendar_update, ctx, event_id=event_id, version=version, location="Room 4",
                                   repeat="FREQ=WEEKLY;BYDAY=WE;COUNT=3")
    assert "location: (none) -> Room 4" in shown and updated.startswith(f"Updated id={event_id}")
    (stored,) = graph.events(user)
    assert stored["location"]["displayName"] == "Room 4" and stored["subject"] == "Review"
    assert stored["recurrence"]["pattern"]["daysOfWeek"] == ["wednesday"]
    listed = await call(calendar_list, ctx, start="2026-12-01", end="2026-12-31")
    assert listed.count("Review @ Room 4 (repeats)") == 3
    read = await call(calendar_get, ctx, event_id=event_id)
    version = re.search(r"version=(\w+)", read).group(1)  # type: ignore[union-attr]
    _, cancelled = await approve(calendar_cancel, ctx, event_id=event_id, version=version)
    assert cancelled.startswith('Cancelled "Review"') and graph.events(user) == []
    with pytest.raises(ToolError, match="Microsoft calendars cannot hold the repeat rule"):
        await approve(calendar_create, ctx, title="Odd", start="2026-12-09T14:00", repeat="FREQ=HOURLY")


async def test_a_change_made_elsewhere_after_the_prompt_is_refused_not_overwritten(
        work: Any, graph: GraphFake) -> None:
    ctx, user = work
    event = graph.add_event(user, STANDUP)
    listed = await call(calendar_list, ctx, start="2026-12-01", end="2026-12-02")
    event_id, version = re.search(r"id=(\S+) version=(\w+)", listed).groups()  # type: ignore[union-attr]
    assert event_id == event["id"]
    parsed = calendar_update.args_model.model_validate({"event_id": event_id, "version": version,
                                                        "start": "2026-12-01T10:00"})
    assert calendar_update.previewer is not None and calendar_update.effector is not None
    payload = (await calendar_update.previewer(ctx, parsed)).payload
    graph.change_elsewhere(user, event_id, subject="Stand-up (moved by Ann)")
    with pytest.raises(ToolError, match=CONFLICT):
        await calendar_update.effector(ctx, parsed, payload)
    (stored,) = graph.events(user)
    assert stored["subject"] == "Stand-up (moved by Ann)" and stored["start"]["dateTime"].startswith("2026-12-01T08")
    # The stale version is refused at Graph itself too: a DELETE with it answers 412.
    parsed = calendar_cancel.args_model.model_validate({"event_id": event_id, "version": version})
    assert calendar_cancel.effector is not None
    with pytest.raises(ToolError, match=CONFLICT):
        await calendar_cancel.effector(ctx, parsed, payload | {"summary": "Stand-up", "when": "-"})
    assert ("DELETE", 412) in [(m, s) for m, _, s in graph.requests] and len(graph.events(user)) == 1


def test_repeat_rules_round_trip_through_graphs_patterns() -> None:
    first = datetime(2026, 12, 8, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    for rule in ("FREQ=DAILY;INTERVAL=2", "FREQ=WEEKLY;BYDAY=MO,WE;COUNT=10", "FREQ=MONTHLY;BYDAY=2TU",
                 "FREQ=MONTHLY;BYMONTHDAY=8;UNTIL=20270630T235959Z", "FREQ=YEARLY;BYMONTHDAY=8;BYMONTH=12"):
        assert from_graph(to_graph(rule, first, "Europe/Berlin")) == rule
    for rule in ("FREQ=HOURLY", "FREQ=MONTHLY;BYMONTHDAY=1,15", "FREQ=WEEKLY;BYDAY=2MO", "FREQ=DAILY;BYHOUR=9"):
        with pytest.raises(InvalidEvent):
            to_graph(rule, first, "Europe/Berlin")


async def test_a_before_event_trigger_skips_meetings_graph_marks_cancelled(work: Any, graph: GraphFake) -> None:
    """An attendee's copy of a called-off meeting stays in an Outlook calendar with isCancelled: it is
    not planned."""
    ctx, user = work
    graph.add_event(user, {**STANDUP, "subject": "Called off", "recurrence": None, "isCancelled": True})
    graph.add_event(user, {**STANDUP, "subject": "Still on", "recurrence": None})
    trigger = parse_schedule({"type": "before_event", "minutes": 10})
    rec = AutomationRecord(id="a1", user_key="console:owner", origin=Origin(surface="console", chat_id="local"),
                           name="brief", schedule=trigger.model_dump(mode="json"), action={"kind": "reminder"},
                           created_at="2026-11-30T00:00:00Z", updated_at="2026-11-30T00:00:00Z")

    async def nothing() -> list[AutomationRecord]:
        return []

    async def no_fire(*_: Any) -> bool:
        return False

    planner = EventPlanner(ctx.store, nothing, no_fire, ctx.services["calendar"], ZoneInfo("Europe/Berlin"))
    planned = await planner.occurrences(rec, trigger, datetime.fromisoformat("2026-12-01T06:00:00+00:00"))
    assert [e.fields["title"] for _, _, e in planned] == ["Still on"]
