"""`anyy mcp list`, `anyy mcp probe NAME`, `anyy tools --json` and `anyy doctor` with MCP servers: the real
`mcp-server-time` over stdio, the notes server over HTTP, one unreachable and one disabled server."""

from __future__ import annotations

import json

from tests.fixtures.mcp_notes import NotesServer
from tests.support.cli import anyy, write_config
from tests.test_mcp_e2e import TIME_SERVER


def config(tmp_path, model, notes: NotesServer) -> str:  # type: ignore[no-untyped-def]
    return write_config(tmp_path, f"""
[model]
base_url = "{model.url_openai}"
model = "fake-1"
max_retries = 0

[mcp.servers.time]
command = "{TIME_SERVER}"
args = ["--local-timezone", "UTC"]
env = {{}}

[mcp.servers.notes]
url = "{notes.url}"
headers = {{ Authorization = "Bearer ${{NOTES_TOKEN}}" }}
policy = "confirm"
keywords = ["notes", "笔记"]
enabled = true

[mcp.servers.gone]
url = "http://127.0.0.1:9/mcp"
timeout_s = 3

[mcp.servers.old]
command = "no-such-command"
enabled = false

[tool_governance]
overrides = {{ mcp_time_convert_time = {{ execution = "confirm" }} }}
""")


async def test_mcp_list_and_probe(tmp_path, home, model, mcp_notes):
    env = {**home, "NOTES_TOKEN": mcp_notes.token}
    cfg = config(tmp_path, model, mcp_notes)
    code, out, err = await anyy("mcp", "list", "--config", cfg, env=env)
    assert code == 1, err  # one enabled server is down
    assert f"time: up (2 tools) — stdio {TIME_SERVER}" in out
    assert "  mcp_time_get_current_time\n" in out and "  mcp_notes_add_note\n" in out
    assert "gone: down: " in out and "old: disabled" in out
    code, out, err = await anyy("mcp", "probe", "time", "--config", cfg, env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("time: up (2 tools)")
    assert any(line.split()[:3] == ["mcp_time_convert_time", "read", "confirm"] for line in lines)  # tightened
    assert any(line.split()[:3] == ["mcp_time_get_current_time", "read", "direct"] for line in lines)
    code, out, _ = await anyy("mcp", "probe", "old", "--config", cfg, env=env)
    assert code == 1 and "not found on PATH" in out and "disabled in config" in out
    code, _, err = await anyy("mcp", "probe", "nope", "--config", cfg, env=env)
    assert code == 2 and "no MCP server 'nope'" in err and "time, notes, gone, old" in err
    code, out, _ = await anyy("mcp", "probe", "notes", "--config", cfg, env=home)  # no token in the environment
    assert code == 1 and "${NOTES_TOKEN} is not set" in out


async def test_tools_json_and_doctor_report_mcp(tmp_path, home, model, mcp_notes):
    env = {**home, "NOTES_TOKEN": mcp_notes.token}
    cfg = config(tmp_path, model, mcp_notes)
    code, out, err = await anyy("tools", "--json", "--config", cfg, env=env)
    assert code == 0, err
    by_name = {r["tool"]: r for r in json.loads(out)}
    assert by_name["mcp_time_get_current_time"] | {} == {
        "toolset": "mcp-time", "tool": "mcp_time_get_current_time", "risk": "read", "approval": "none",
        "execution": "direct", "visible_chars": 4000, "requires": "mcp", "available": True}
    assert by_name["mcp_notes_add_note"]["execution"] == "confirm"
    assert by_name["mcp_notes_add_note"]["risk"] == "runtime-low"
    assert by_name["task_create"]["execution"] == "audit"  # the built-in tools are still listed
    assert "mcp-gone: down:" in err
    code, out, _ = await anyy("doctor", "--config", cfg, env=env)
    assert code == 1
    assert "✓ mcp time: up (2 tools) over stdio" in out and "✓ mcp notes: up (" in out
    assert "✗ mcp gone: down: " in out and "mcp old" not in out
