"""Two residents on one PostgreSQL database plan the same before_event trigger from the same calendar
(Radicale): both see the occurrence and fire it, and it is delivered once, whichever of them is first."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from store import leases
from store.records import Origin
from tests.test_trigger_calendar import ics, put
from toolsets.registry import TOOLSETS
from toolsets.schedule import Reminder, parse_schedule

OWNER = "console:owner"
CONSOLE = Origin(surface="console", chat_id="local")


async def test_an_occurrence_fires_once_whichever_resident_sees_it(
        start_console: Any, make_config: Any, caldav_server: Any, pg_cluster: Any,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.automations.event_plan")
    monkeypatch.setenv("ANYY_TEST_CALENDAR_PASSWORD", caldav_server.password)
    calendar = caldav_server.make_calendar(f"Shared {uuid.uuid4().hex[:6]}", seed=False)
    config = make_config(runtime={"timezone": "Europe/Berlin"},
                         calendar={"url": calendar, "username": caldav_server.username,
                                   "password_env": "ANYY_TEST_CALENDAR_PASSWORD", "timeout_s": 5})
    config.store.url = pg_cluster.url(pg_cluster.database())
    a = await start_console(config=config, toolsets=TOOLSETS, store_owner=f"{leases.OWNER}/a")
    b = await start_console(config=config, toolsets=TOOLSETS, store_owner=f"{leases.OWNER}/b")
    rec = await a.gw.services["automations"].create(
        OWNER, CONSOLE, "before meetings", parse_schedule({"type": "before_event", "minutes": 10}),
        Reminder(kind="reminder"))
    # Starts in five minutes: its firing time (ten before) has passed, so each resident fires it at once.
    put(caldav_server, calendar, "sync", ics("sync", "Sync", datetime.now(UTC) + timedelta(minutes=5)))
    await asyncio.gather(a.gw.triggers.calendar.check(), b.gw.triggers.calendar.check())

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while len(fired := [r.getMessage() for r in caplog.records if "event_plan_fired" in r.getMessage()]) < 2:
        assert loop.time() < deadline, f"both residents did not fire within 30s: {fired}"
        await asyncio.sleep(0.05)
    assert sorted(line.rsplit("fired=", 1)[1] for line in fired) == ["False", "True"]  # the claim is one row
    await a.gw.idle()
    await b.gw.idle()
    out = a.new_output() + b.new_output()
    [line] = [line for line in out.splitlines() if "📅" in line]
    assert "📅 Sync at " in line
    [run] = await a.gw.services["automations"].history(OWNER, rec.id)
    assert run.status == "delivered"
