"""`/status`: model, zone, toolsets and approvals, and why a memory write would be held now: the outside
content still in view, named — until /new."""

from __future__ import annotations

from tests.fixtures.model import reply, tool_call
from tests.fixtures.web import FakeSite


async def test_status_says_why_a_write_would_be_held_now(start_console, make_config, model, site: FakeSite) -> None:
    console = await start_console(make_config(web={"allow_private_urls": True},
                                              runtime={"timezone": "Europe/Lisbon"}))
    out = await console.say("/status")
    assert "Model: " in out and "not configured" not in out and "Time zone: Europe/Lisbon" in out
    assert "Toolsets: chosen for each message" in out and "Approvals: none waiting for you" in out
    assert "Memory and automation writes: run at once: no outside content is in view" in out
    url = site.url("/inject")
    model.script(tool_call("web_fetch", {"url": url}),
                 tool_call("memory", {"action": "add", "target": "notes", "content": "x"}), reply("Asked."))
    await console.say(f"read {url} and remember it")
    out = await console.say("/status")
    assert f"held for your approval: this conversation still has outside content in view (web:{url})" in out
    assert "Approvals: 1 waiting for you: " in out and "(memory)" in out
    assert "(last: " in out and "web" in out
    await console.say("/toolsets pin web")
    await console.say("/new")
    out = await console.say("/status")
    assert "no outside content is in view" in out and "Toolsets: pinned: web" in out
    assert len(model.requests) == 3  # /status never calls the model
