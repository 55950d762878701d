"""Small things a new owner hits in the first hour, through `anyy` as they run it."""

from __future__ import annotations

import json

from gateway import __version__
from tests.fixtures.model import reply, tool_call
from tests.support.cli import anyy, model_config, write_config


async def test_version(home):
    code, out, _ = await anyy("--version", env=home)
    assert code == 0 and out.strip() == f"anyy {__version__}"


async def test_audit_since_is_understood_or_refused_and_filters_by_tool(tmp_path, home, model):
    cfg = write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\nmax_retries = 0\n'
                                 '[tool_governance]\noverrides = { task_create = { execution = "confirm" } }\n')
    model.script(tool_call("task_create", {"title": "milk"}), reply("Asked."))  # held: an audited approval
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin="add task milk\n")
    assert code == 0 and "Asked." in out, (out, err)
    code, _, err = await anyy("audit", "--since", "someday", "--config", cfg, env=home)
    assert code == 2 and "--since" in err and "yesterday" in err, err
    for since in ("yesterday", "today", "7d"):
        code, out, err = await anyy("audit", "--since", since, "--config", cfg, env=home)
        assert code == 0 and "task_create" in out, (since, out, err)
    code, out, _ = await anyy("audit", "--tool", "task_create", "--json", "--config", cfg, env=home)
    events = json.loads(out)
    assert code == 0 and events and {e["tool"] for e in events} == {"task_create"}
    code, out, _ = await anyy("audit", "--tool", "email_send", "--config", cfg, env=home)
    assert code == 0 and out.strip() == "No audit events of email_send."


async def test_tools_has_a_header_and_aligned_columns(home):
    code, out, _ = await anyy("tools", env=home)
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["TOOLSET", "TOOL", "RISK", "APPROVAL", "EXECUTION"]
    risk_at = header.index("RISK")
    assert all(row[risk_at - 2:risk_at] == "  " for row in rows), out  # every row's risk starts in the column


async def test_web_search_without_a_backend_says_so(tmp_path, home, model):
    model.script(tool_call("web_search", {"query": "lisbon weather"}), reply("No search here."))
    code, out, err = await anyy("chat", "--config", model_config(tmp_path, model), env=home, stdin="weather?\n")
    assert code == 0 and "No search here." in out, err
    result = model.requests[1].messages[-1]["content"]
    assert "no web search backend is configured" in result and "load_toolsets" not in result, result
