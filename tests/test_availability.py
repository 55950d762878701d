"""One truth for "is this toolset here": the running resident, `anyy tools`, `anyy doctor` and the
dashboard's tools page give the same answer for every toolset, with and without its config."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from gateway.cli.admin import tools as tools_command
from gateway.cli.doctor import toolsets_line
from gateway.dashboard.catalog import catalog
from gateway.services.availability import DID_NOT_START, availability
from toolsets.registry import TOOLSETS

# Services every config has: nothing to configure, so no "without" case.
ALWAYS = {"workspace", "automations", "web", "subagents", "artifacts", "skills"}


def sections(service: str, x_display: str) -> dict[str, Any]:
    """The config that brings `service` (on this machine, which has Chromium, espeak-ng, ffmpeg, Xvfb)."""
    return {
        "email": {"email": {"imap_host": "127.0.0.1", "smtp_host": "127.0.0.1", "username": "owner",
                            "from_address": "owner@example.test"}},
        "calendar": {"calendar": {"url": "http://127.0.0.1:9/dav/"}},
        "web_search": {"web": {"search": "searxng", "searxng_url": "http://127.0.0.1:9"}},
        "terminal": {"terminal": {"enabled": True}},
        "browser": {"browser": {"enabled": True}},
        "images": {"images": {"url": "http://127.0.0.1:9/v1"}},
        "tts": {"tts": {"engine": "espeak-ng"}},
        "computer_use": {"computer_use": {"enabled": True, "xvfb": False, "display": x_display}},
    }[service]


WITHOUT: dict[str, dict[str, Any]] = {"terminal": {"terminal": {"enabled": False}}}  # the others are off by default
OPTIONAL = ["email", "calendar", "web_search", "terminal", "browser", "images", "tts", "computer_use"]


def test_every_requirement_of_every_toolset_is_walked_below() -> None:
    """A toolset or tool added with a new requirement must join OPTIONAL (and `availability`) or ALWAYS."""
    required = {r for ts in TOOLSETS for r in (ts.requires, *(t.requires for t in ts.tools)) if r is not None}
    assert required == ALWAYS | set(OPTIONAL)


def needing(service: str) -> set[str]:
    """The tools that exist only with `service`."""
    return {t.name for ts in TOOLSETS for t in ts.tools if service in (ts.requires, t.requires)}


@pytest.mark.parametrize("service", OPTIONAL)
@pytest.mark.parametrize("configured", [True, False], ids=["with", "without"])
async def test_the_runtime_anyy_tools_doctor_and_dashboard_agree(service: str, configured: bool, make_config: Any,
                                                                start_console: Any, x_display: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config(**(sections(service, x_display) if configured else WITHOUT.get(service, {})))
    harness = await start_console(config)
    gw = harness.gw
    runtime = {t.name for ts in gw.runtime.available() for t in ts.tools}
    runtime_toolsets = {ts.name for ts in gw.runtime.available()}

    capsys.readouterr()
    assert await tools_command(config, argparse.Namespace(json=True)) == 0
    rows = json.loads(capsys.readouterr().out)
    listed = {r["tool"] for r in rows if r["available"]}
    assert all(r["why_not"] for r in rows if not r["available"])  # an absent tool always says why
    assert not any("why_not" in r for r in rows if r["available"])

    page = catalog(TOOLSETS, gw.toolsets, availability(config), set(gw.services), config.tool_governance,
                   gw.access.guest_may_use)
    dashboard = {row.name for row in page if row.available}
    doctor = set(toolsets_line(config)[2].split(": ", 1)[1].split(";")[0].split(", "))

    assert listed == runtime
    assert dashboard == doctor == runtime_toolsets
    if configured:
        assert needing(service) <= runtime, service
    else:
        assert needing(service).isdisjoint(runtime), service
        why = {r["why_not"] for r in rows if r["tool"] in needing(service)}
        assert len(why) == 1 and "[" in why.pop()  # names the config key that would bring it


async def test_a_service_that_fails_as_it_starts_is_absent_and_the_dashboard_says_so(make_config: Any,
                                                                                     start_console: Any) -> None:
    """The one thing a config cannot predict: computer use on a display nobody is serving."""
    config = make_config(computer_use={"enabled": True, "xvfb": False, "display": ":987"})
    assert "computer_use" in availability(config)  # the config asks for it and the programs are here
    gw = (await start_console(config)).gw
    assert "computer_use" not in {ts.name for ts in gw.runtime.available()}
    page = catalog(TOOLSETS, gw.toolsets, availability(config), set(gw.services), config.tool_governance,
                   gw.access.guest_may_use)
    row = next(r for r in page if r.name == "computer_use")
    assert not row.available and row.why_not == DID_NOT_START
