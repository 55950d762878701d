"""Issue 16, end to end: MCP servers as toolsets in a running Gateway, driven through the console and
the fake model, against real MCP servers: `mcp-server-time` (PyPI) over stdio, and the notes server
(tests/fixtures/mcp_notes.py, the SDK's MCPServer) over streamable HTTP with a bearer token.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import uuid
from pathlib import Path

import pytest

from store.approvals import Approvals
from tests.fixtures.mcp_notes import NotesServer
from tests.fixtures.model import reply, tool_call

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
TIME = {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "timeout_s": 10}


def notes_config(server: NotesServer, **extra: object) -> dict[str, object]:
    return {"url": server.url, "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}, "keywords": ["notes", "笔记"],
            "timeout_s": 10, **extra}


@pytest.fixture
def mcp_env(monkeypatch: pytest.MonkeyPatch, mcp_notes: NotesServer) -> NotesServer:
    monkeypatch.setenv("NOTES_TOKEN", mcp_notes.token)
    return mcp_notes


def last_result(model) -> str:  # type: ignore[no-untyped-def]
    """The newest tool result the model was sent."""
    return [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"][-1]


async def notes_on_server(h) -> str:  # type: ignore[no-untyped-def]
    result = await h.gw.services["mcp"].call("notes", "list_notes", {})
    return result.content[0].text


async def wait_until(check, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_model_calls_the_stdio_time_server(start_console, make_config, model):
    h = await start_console(make_config(mcp={"servers": {"time": TIME}}))
    model.script(tool_call("mcp_time_get_current_time", {"timezone": "Asia/Tokyo"}), reply("It is late in Tokyo."))
    out = await h.say("What time is it in Tokyo?")
    assert "It is late in Tokyo." in out
    first = model.requests[-2]
    assert {"mcp_time_get_current_time", "mcp_time_convert_time"} <= set(first.tool_names)  # selected by "time"
    sent = next(t["function"] for t in first.body["tools"] if t["function"]["name"] == "mcp_time_get_current_time")
    assert sent["parameters"]["required"] == ["timezone"]  # the server's own schema, passed through
    assert "IANA timezone name" in sent["parameters"]["properties"]["timezone"]["description"]
    result = last_result(model)
    assert result.startswith('<untrusted source="mcp:time/get_current_time"')
    assert '"timezone": "Asia/Tokyo"' in result and '"day_of_week"' in result


async def test_arguments_are_checked_against_the_servers_schema(start_console, make_config, model):
    h = await start_console(make_config(mcp={"servers": {"time": TIME}}))
    model.script(tool_call("mcp_time_get_current_time", {"timezone": 7}), reply("Oops."))
    await h.say("what time is it")
    result = last_result(model)
    assert result.startswith("Error: invalid arguments for mcp_time_get_current_time")
    assert "7 is not of type 'string'" in result


def _child_pids(name: str) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and name in cmdline:
            pids.append(int(stat.parent.name))
    return pids


async def test_a_server_that_dies_is_restarted_and_a_call_meanwhile_gets_a_clear_error(
        start_console, make_config, model):
    h = await start_console(make_config(mcp={"servers": {"time": TIME}}))
    server = h.gw.services["mcp"].server("time")
    [pid] = _child_pids("mcp-server-time")
    os.kill(pid, signal.SIGKILL)
    model.script(tool_call("mcp_time_get_current_time", {"timezone": "UTC"}), reply("The clock is restarting."))
    out = await h.say("what time is it?")
    assert "The clock is restarting." in out
    result = last_result(model)
    assert result.startswith("Error: MCP server 'time'") and "restart" in result
    await wait_until(lambda: server.state == "up" and server.connects == 2)
    assert _child_pids("mcp-server-time") and pid not in _child_pids("mcp-server-time")
    model.script(tool_call("mcp_time_get_current_time", {"timezone": "UTC"}), reply("Back."))
    await h.say("and now, what time is it?")
    result = last_result(model)
    assert '"timezone": "UTC"' in result and not result.startswith("Error")


async def test_a_write_tool_is_held_for_approval_and_runs_once(start_console, make_config, model, mcp_env):
    h = await start_console(make_config(mcp={"servers": {"notes": notes_config(mcp_env)}}))
    text = f"buy oat milk {uuid.uuid4().hex[:8]}"
    model.script(tool_call("mcp_notes_add_note", {"text": text}), reply("I asked for your approval."))
    out = await h.say("add to my notes: buy oat milk")
    assert "Approval needed: mcp_notes_add_note" in out
    assert "MCP server: notes\nTool: add_note\nArguments:\n{\n  \"text\": \"" + text + "\"\n}" in out
    assert text not in await notes_on_server(h)  # nothing ran yet
    approval_id = re.search(r"/approve (\S+)", out).group(1)
    model.script(reply("Added it."))
    out = await h.say(f"/approve {approval_id}")
    assert "Approved; running it now." in out
    await h.gw.idle()
    rec = await Approvals(h.gw.store).get(approval_id)
    assert rec.state == "succeeded" and rec.result.startswith('<untrusted source="mcp:notes/add_note"')
    assert "Already succeeded" in await h.say(f"/approve {approval_id}")
    assert (await notes_on_server(h)).splitlines().count(text) == 1


async def test_read_only_tools_run_directly_and_overrides_only_tighten(start_console, make_config, model, mcp_env):
    servers = {"notes": notes_config(mcp_env, policy="direct")}
    h = await start_console(make_config(mcp={"servers": servers}, tool_governance={"overrides": {
        "mcp_notes_list_notes": {"execution": "confirm"}, "mcp_notes_show_picture": {"execution": "direct"}}}))
    model.script(tool_call("mcp_notes_show_picture", {}), reply("Here is the cover."))
    assert "Approval needed" not in await h.say("show the notes cover picture")
    result = last_result(model)
    assert ("The cover:\n[image image/png, 24 bytes; not shown]\n[resource notes://cover, text/plain]\n"
            "cover notes") in result
    model.script(tool_call("mcp_notes_list_notes", {}), reply("Asked."))  # read-only, tightened to confirm
    assert "Approval needed: mcp_notes_list_notes" in await h.say("list my notes")
    text = f"direct {uuid.uuid4().hex[:8]}"  # not read-only, but the server's policy says direct
    model.script(tool_call("mcp_notes_add_note", {"text": text}), reply("Added."))
    assert "Approval needed" not in await h.say("add a note")
    assert text in await notes_on_server(h)


async def test_tools_list_changed_updates_the_toolset(start_console, make_config, model, mcp_env):
    h = await start_console(make_config(mcp={"servers": {"notes": notes_config(mcp_env)}}))
    name = f"extra_{uuid.uuid4().hex[:6]}"
    await h.gw.services["mcp"].call("notes", "grow", {"name": name})
    await wait_until(lambda: f"mcp_notes_{name}" in h.gw.tools)
    model.script(tool_call(f"mcp_notes_{name}", {}), reply("Done."))
    await h.say("notes: use the new tool")
    assert f"mcp_notes_{name}" in model.requests[-2].tool_names
    result = last_result(model)
    assert f"{name} here" in result


async def test_slash_tools_lists_mcp_tools_with_policy_and_server_state(start_console, make_config, model, mcp_env,
                                                                        monkeypatch):
    servers = {"time": {**TIME, "guests": True}, "notes": notes_config(mcp_env),
               "broken": {"url": "http://127.0.0.1:9/mcp", "timeout_s": 2}, "off": {**TIME, "enabled": False}}
    h = await start_console(make_config(mcp={"servers": servers}))
    by_name = {ts.name: ts for ts in h.gw.toolsets}
    assert by_name["mcp-time"].guests and not by_name["mcp-notes"].guests  # owners only unless configured
    assert "mcp-off" not in by_name and "off" not in h.gw.services["mcp"].servers
    await h.say("/toolsets pin mcp-time mcp-notes")
    out = await h.say("/tools")
    assert "mcp_time_get_current_time (read, direct)" in out
    assert "mcp_notes_add_note (runtime-low, confirm)" in out
    assert re.search(r"mcp-broken: down: .+ \(restarting with backoff\)", out)
    assert "mcp-time: up (2 tools)" in out


async def test_the_dashboard_health_page_shows_each_server(dashboard_config, start_console, start_dashboard):
    servers = {"time": TIME, "broken": {"url": "http://127.0.0.1:9/mcp", "timeout_s": 2}}
    h = await start_console(dashboard_config(mcp={"servers": servers}))
    d = await start_dashboard(h)
    page = await d.page(await d.login(), "/dashboard/health")
    section = page[page.index("<h2>mcp</h2>"):]
    assert re.search(r"time</td>.*✓ up \(2 tools\)", section, re.DOTALL), section
    assert re.search(r"broken</td>.*✗ down: .+ \(restarting with backoff\)", section, re.DOTALL), section


async def test_name_rules_and_the_child_environment_with_a_real_stdio_server(start_console, make_config, model,
                                                                            monkeypatch):
    from tests.fixtures.mcp_odd import LONG_TOOL
    from tests.test_mcp_names import sha8

    monkeypatch.setenv("ODD_SECRET", "not for the child")
    monkeypatch.setenv("ODD_TOKEN_SOURCE", "tok-123")
    odd = {"command": sys.executable, "args": ["-m", "tests.fixtures.mcp_odd"], "timeout_s": 10,
           "env": {"ODD_TOKEN": "${ODD_TOKEN_SOURCE}", "PYTHONPATH": str(Path(__file__).parent.parent)}}
    h = await start_console(make_config(mcp={"servers": {"odd": odd}}))
    names = [t.name for t in h.gw.toolsets[-1].tools]
    long_name = "mcp_odd_" + LONG_TOOL
    assert len(LONG_TOOL) == 70 and long_name[:55] + "_" + sha8(long_name) in names
    assert "mcp_odd_find_note" in names and "mcp_odd_find_note_" + sha8("mcp_odd_find.note") in names
    assert all(len(n) <= 64 for n in names)
    model.script(tool_call("mcp_odd_find_note_" + sha8("mcp_odd_find.note"), {}), reply("ok"))
    await h.say("odd: find the note")
    assert "find.note ran" in last_result(model)  # the suffixed name calls the right remote tool
    model.script(tool_call("mcp_odd_environment", {}), reply("ok"))
    await h.say("odd: show your environment")
    shown = json.loads(last_result(model).split("\n", 1)[1].rsplit("\n", 1)[0])
    assert set(shown) <= {"PATH", "HOME", "LANG", "ODD_TOKEN", "PYTHONPATH", "LC_CTYPE"}, sorted(shown)
    assert shown["ODD_TOKEN"] == "tok-123" and shown["PATH"] == os.environ["PATH"]
    assert "ODD_SECRET" not in shown and "USER" not in shown and "SHELL" not in shown


async def test_a_call_that_takes_too_long_times_out_with_a_clear_error(start_console, make_config, model, mcp_env):
    h = await start_console(make_config(mcp={"servers": {"notes": notes_config(mcp_env, timeout_s=1)}}))
    model.script(tool_call("mcp_notes_slow", {"seconds": 5}), reply("Too slow."))
    started = asyncio.get_running_loop().time()
    await h.say("notes: be slow")
    assert asyncio.get_running_loop().time() - started < 4
    assert last_result(model) == "Error: MCP server 'notes' did not answer slow within 1s"
    model.script(tool_call("mcp_notes_list_notes", {}), reply("Listed."))  # the connection still works
    await h.say("list my notes")
    assert last_result(model).startswith('<untrusted source="mcp:notes/list_notes"')


async def test_a_guest_gets_only_the_servers_shared_with_guests(start_console, make_config, model, mcp_env):
    from tests.test_authority import guest_replies, pair_guest, say_as_guest

    servers = {"time": TIME, "notes": notes_config(mcp_env, guests=True)}
    h = await start_console(make_config(mcp={"servers": servers}))
    await pair_guest(h)
    model.script(tool_call("mcp_time_get_current_time", {"timezone": "UTC"}),
                 tool_call("load_toolsets", {"names": ["mcp-time"]}), reply("I can't tell the time here."))
    await say_as_guest(h, "what time is it? check my notes too")
    for request in model.requests:
        assert not [n for n in request.tool_names if n.startswith("mcp_time_")], request.tool_names
        loader = next(t for t in request.body["tools"] if t["function"]["name"] == "load_toolsets")
        assert "- mcp-time:" not in loader["function"]["description"]
        assert "- mcp-notes:" in loader["function"]["description"]
    assert "mcp_notes_list_notes" in model.requests[0].tool_names  # shared: selected by "notes"
    results = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert "mcp_time_get_current_time is not available in this conversation" in results[0]
    assert "unknown toolset" in results[1]
    await say_as_guest(h, "/tools")
    listing = (await guest_replies(h))[-1]
    assert "• mcp-notes: up" in listing and "mcp-time" not in listing
