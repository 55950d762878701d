"""Issue 9: creating, changing and cancelling events through the approval flow, end to end in the console.

The real Gateway and console surface, the fake model, and the session's real CalDAV server (Radicale),
each test on its own freshly seeded calendar. What counts is what is on the server (every resource and
its ETag, read with plain PROPFIND/GET), the approval's state, and what the owner reads on the console.
"""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit

import pytest

from store.approvals import Approvals
from tests.fixtures.caldav import CalDAVServer, seed_ics
from tests.fixtures.model import reply, tool_call

OWNER = "console:owner"
CREATE = {"title": "Lunch with Ana", "start": "2025-04-03T12:30", "end": "2025-04-03T13:30",
          "location": "Café Luise", "attendees": ["ana@example.com"]}
UPDATE = {"title": "Dentist (check-up)", "start": "2025-03-12T16:30"}
# kind -> (tool, the event it changes, its arguments besides event_id and version)
KINDS = {"create": ("calendar_create", None, CREATE), "update": ("calendar_update", "dentist", UPDATE),
         "cancel": ("calendar_cancel", "team-sync", {})}
PROMPTS = {
    "create": ["Create an event in Scratch", "  title: Lunch with Ana", "  when: Thu 03 Apr 2025 12:30–13:30 CEST",
               "  location: Café Luise", "  attendees: ana@example.com"],
    "update": ['Change "Dentist" (Wed 12 Mar 2025 15:00–15:45 CET) in Scratch',
               "  title: Dentist -> Dentist (check-up)",
               "  when: Wed 12 Mar 2025 15:00–15:45 CET -> Wed 12 Mar 2025 16:30–17:15 CET"],
    "cancel": ["Cancel (delete) this event:\n  title: Team sync\n  when: Mon 03 Mar 2025 10:00–11:00 CET"],
}


@pytest.fixture
def calendar_config(make_config, caldav_server: CalDAVServer, fresh_calendar: str, monkeypatch: pytest.MonkeyPatch):
    """Build a config whose [calendar] section is this test's fresh calendar (or `url`), in Berlin time."""
    monkeypatch.setenv("ANYY_TEST_CALENDAR_PASSWORD", caldav_server.password)

    def build(url: str = fresh_calendar):
        return make_config(runtime={"timezone": "Europe/Berlin"},
                           calendar={"url": url, "username": caldav_server.username,
                                     "password_env": "ANYY_TEST_CALENDAR_PASSWORD", "timeout_s": 5})

    return build


@pytest.fixture
async def harness(start_console, calendar_config):
    return await start_console(calendar_config())


def ics(server: CalDAVServer, href: str) -> str:
    with server.http() as http:
        resp = http.get(href)
    resp.raise_for_status()
    return resp.text.replace("\r\n ", "")  # unfold long lines


def href_of(calendar_url: str, uid: str) -> str:
    """The path of a seeded event, as PROPFIND lists it."""
    return f"{urlsplit(calendar_url).path}{uid}.ics"


async def version_via_model(h, model, uid: str) -> str:
    """Have the model read the event with calendar_get, as it must before changing it; returns the version
    the tool showed it."""
    model.script(tool_call("calendar_get", {"event_id": uid}), reply("Read it."))
    assert "Read it." in await h.say(f"calendar: show me the event {uid}")
    shown = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"][-1]
    found = re.match(rf"id={re.escape(uid)} version=(\S+)\n", shown)
    assert found, shown
    return found.group(1)


async def held(h, model, kind: str) -> tuple[str, str]:
    """Have the model ask for the change; returns (approval id, console output). Nothing changes yet."""
    tool, uid, args = KINDS[kind]
    if uid is not None:
        args = {"event_id": uid, "version": await version_via_model(h, model, uid), **args}
    model.script(tool_call(tool, args), reply("Asked for approval."))
    out = await h.say(f"calendar: {kind} it")
    assert f"🔐 Approval needed: {tool}" in out and "Asked for approval." in out
    found = re.search(r"/approve (\S+)", out)
    assert found, out
    assert await state(h, found.group(1)) == "pending"
    return found.group(1), out


async def state(h, approval_id: str) -> str:
    rec = await Approvals(h.gw.store).get(approval_id)
    assert rec is not None
    return rec.state


def assert_one_change(kind: str, server: CalDAVServer, cal: str, before: dict[str, str], after: dict[str, str]):
    """`after` is `before` plus exactly the one change `kind` asked for, with the previewed fields."""
    if kind == "create":
        (added,) = set(after) - set(before)
        assert {h: after[h] for h in before} == before
        text = ics(server, added)
        assert "SUMMARY:Lunch with Ana" in text and "DTSTART;TZID=Europe/Berlin:20250403T123000" in text
        assert "DTEND;TZID=Europe/Berlin:20250403T133000" in text and "LOCATION:Café Luise" in text
        assert "mailto:ana@example.com" in text
    elif kind == "update":
        dentist = href_of(cal, "dentist")
        assert set(after) == set(before) and [h for h in before if before[h] != after[h]] == [dentist]
        text = ics(server, dentist)
        assert "SUMMARY:Dentist (check-up)" in text and "DTSTART;TZID=Europe/Berlin:20250312T163000" in text
        assert "DTEND;TZID=Europe/Berlin:20250312T171500" in text and "LOCATION:Dr. Weiss" in text
    else:
        assert set(before) - set(after) == {href_of(cal, "team-sync")}
        assert {h: before[h] for h in after} == after


@pytest.mark.parametrize("kind", KINDS)
async def test_one_approval_makes_exactly_one_change_and_a_second_makes_none(
        harness, model, caldav_server: CalDAVServer, fresh_calendar: str, kind: str):
    approval_id, prompt = await held(harness, model, kind)
    for line in PROMPTS[kind]:
        assert line in prompt
    before = caldav_server.etags(fresh_calendar)

    out = await harness.say(f"/approve {approval_id}")
    tool = KINDS[kind][0]
    assert "Approved; running it now." in out and f"✅ Approved — done by {OWNER}: {tool}" in out
    assert f"echo: [event] Approval {approval_id} for {tool} was approved by {OWNER} and has run." in out
    assert await state(harness, approval_id) == "succeeded"
    after = caldav_server.etags(fresh_calendar)
    assert_one_change(kind, caldav_server, fresh_calendar, before, after)

    # A second tap, a second device, replayed callbacks: nothing more happens on the server.
    assert "Already succeeded; nothing changed." in await harness.say(f"/approve {approval_id}")
    answers = await asyncio.gather(*[harness.gw.approvals.decide(approval_id, OWNER, True) for _ in range(3)])
    await harness.gw.idle()
    assert set(answers) == {"Already succeeded; nothing changed."}
    assert caldav_server.etags(fresh_calendar) == after


@pytest.mark.parametrize("kind", KINDS)
async def test_concurrent_approvals_make_one_change(harness, model, caldav_server: CalDAVServer,
                                                    fresh_calendar: str, kind: str):
    approval_id, _ = await held(harness, model, kind)
    before = caldav_server.etags(fresh_calendar)
    answers = await asyncio.gather(*[harness.gw.approvals.decide(approval_id, OWNER, True) for _ in range(5)])
    await harness.gw.idle()
    assert answers.count("Approved; running it now.") == 1
    assert await state(harness, approval_id) == "succeeded"
    assert_one_change(kind, caldav_server, fresh_calendar, before, caldav_server.etags(fresh_calendar))


@pytest.mark.parametrize("kind", KINDS)
async def test_deny_changes_nothing(harness, model, caldav_server: CalDAVServer, fresh_calendar: str, kind: str):
    before = caldav_server.etags(fresh_calendar)
    approval_id, _ = await held(harness, model, kind)
    out = await harness.say(f"/deny {approval_id} not now")
    assert "Denied." in out and f"🚫 Denied by {OWNER}: {KINDS[kind][0]}" in out and "Reason: not now" in out
    assert "Already denied; nothing changed." in await harness.say(f"/approve {approval_id}")
    assert await state(harness, approval_id) == "denied"
    assert caldav_server.etags(fresh_calendar) == before


@pytest.mark.parametrize("kind", ["update", "cancel"])
async def test_an_event_changed_on_the_server_after_the_prompt_is_refused(
        harness, model, caldav_server: CalDAVServer, fresh_calendar: str, kind: str):
    approval_id, _ = await held(harness, model, kind)
    uid = KINDS[kind][1]
    # Someone moves the event on their phone while the prompt waits: its ETag changes.
    moved = seed_ics(uid, "SUMMARY:Moved by phone\nDTSTART;TZID=Europe/Berlin:20250314T090000\n"
                          "DTEND;TZID=Europe/Berlin:20250314T094500")
    with caldav_server.http() as http:
        http.put(f"{fresh_calendar}{uid}.ics", content=moved).raise_for_status()
    changed = caldav_server.etags(fresh_calendar)

    out = await harness.say(f"/approve {approval_id}")
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed"
    assert rec.result == "the event changed on the server since you approved; nothing was changed"
    assert f"❌ Approved — failed by {OWNER}: {KINDS[kind][0]}" in out and rec.result in out  # the owner is told
    assert f"Approval {approval_id} for {KINDS[kind][0]} was approved by {OWNER} but failed" in out
    assert caldav_server.etags(fresh_calendar) == changed  # the phone's version stands
    assert "SUMMARY:Moved by phone" in ics(caldav_server, href_of(fresh_calendar, uid))


async def test_server_down_at_approval_fails_with_a_clear_error(
        start_console, calendar_config, model, caldav_server: CalDAVServer, fresh_calendar: str, caldav_down_url: str):
    first = await start_console(calendar_config())
    approval_id, _ = await held(first, model, "create")
    await first.gw.stop()
    before = caldav_server.etags(fresh_calendar)

    # The calendar server is unreachable when the owner approves (after a restart, say).
    second = await start_console(calendar_config(caldav_down_url))
    out = await second.say(f"/approve {approval_id}")
    rec = await Approvals(second.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed" and rec.result is not None
    assert rec.result.startswith("cannot reach the calendar server") and "127.0.0.1" in rec.result
    assert "❌ Approved — failed" in out and rec.result in out
    assert caldav_server.etags(fresh_calendar) == before


async def test_server_down_when_asked_is_a_clear_error_and_holds_nothing(
        start_console, calendar_config, model, caldav_down_url: str):
    h = await start_console(calendar_config(caldav_down_url))
    model.script(tool_call("calendar_create", CREATE), reply("The calendar server is down."))
    out = await h.say("calendar: add lunch with Ana")
    assert "The calendar server is down." in out and "Approval needed" not in out
    assert await Approvals(h.gw.store).list(("pending",)) == []
    result = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"][-1]
    assert result.startswith("Error: cannot reach the calendar server")


@pytest.mark.parametrize(("default", "complaint"), [
    ("nope", "✗ calendar: [calendar] default_calendar matches nothing: there is no calendar called 'nope'"),
    ("scratch-by-segment", None),
])
async def test_doctor_says_when_default_calendar_matches_nothing(make_config, caldav_server: CalDAVServer,
                                                                 fresh_calendar: str, monkeypatch: pytest.MonkeyPatch,
                                                                 default: str, complaint: str | None) -> None:
    from gateway.services.factory import connector_checks

    monkeypatch.setenv("ANYY_TEST_CALENDAR_PASSWORD", caldav_server.password)
    segment = urlsplit(fresh_calendar).path.rstrip("/").rsplit("/", 1)[-1]
    config = make_config(calendar={"url": fresh_calendar, "username": caldav_server.username,
                                   "password_env": "ANYY_TEST_CALENDAR_PASSWORD",
                                   "default_calendar": segment if complaint is None else default})
    lines = ["{} {}: {}".format(*line) for line in await connector_checks(config)  # as doctor prints them
             if line[1] == "calendar"]
    assert lines[0].startswith("✓ calendar: 1 calendar(s): Scratch")
    assert lines[1:] == ([] if complaint is None else [lines[1]])
    if complaint is not None:
        assert lines[1].startswith(complaint)
