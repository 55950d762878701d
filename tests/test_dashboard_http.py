"""Issue 19: the dashboard at the HTTP level — access (token, session cookie, CSRF), what each page shows,
and that its buttons act through the same services as chat, once.

A real Gateway with the console surface and the fake model, the real aiohttp server on a loopback port,
and aiohttp's client as the browser.
"""

from __future__ import annotations

import html
import os
import re
from datetime import datetime, timedelta

import pytest

from gateway.config import ConfigError, parse_config
from gateway.selection.selector import schema_bytes
from store.approvals import Approvals
from store.audit import Audit
from store.records import AuditEvent, iso, utcnow
from tests.fixtures.model import reply, status, tool_call
from toolsets.loader import loader_tool
from toolsets.schedule import Interval, Reminder

PAGES = ["tools", "toolsets", "approvals", "automations", "sessions", "audit", "health"]
# task_create is direct by default; the override makes it a held call, which gives approvals without email.
CONFIRM_TASKS = {"overrides": {"task_create": {"execution": "confirm"}}}


@pytest.fixture
async def dash(dashboard_config, start_console, start_dashboard):
    harness = await start_console(dashboard_config(tool_governance=CONFIRM_TASKS))
    return harness, await start_dashboard(harness)


async def held_task(harness, model, title: str = "buy milk") -> str:
    """The model asks to create a task; the override holds it. Returns the approval id."""
    model.script(tool_call("task_create", {"title": title}), reply("Waiting for your approval."))
    out = await harness.say("add a task please")
    found = re.search(r"/approve (\S+)", out)
    assert found, out
    return found.group(1)


async def test_no_page_without_a_session(dash):
    _, d = dash
    anonymous = d.client()
    for path in [*(f"/dashboard/{p}" for p in PAGES), "/dashboard/static/style.css", "/dashboard", "/dashboard/nope"]:
        async with anonymous.get(path, allow_redirects=False) as r:
            body = await r.text()
            assert r.status == 401, path
            assert "anyy dashboard url" in body and "<table" not in body
    # A cookie the server never issued is no session either.
    forged = d.client()
    forged.cookie_jar.update_cookies({"anyy_dashboard": "made-up"})
    async with forged.get("/dashboard/tools") as r:
        assert r.status == 401


async def test_a_bad_token_is_refused_and_gives_no_cookie(dash):
    _, d = dash
    c = d.client()
    for params in ({"token": "wrong"}, {"token": d.token[:-1]}, {"token": d.token + "x"}, {}):
        async with c.get("/dashboard/login", params=params, allow_redirects=False) as r:
            assert r.status == 403 and "Set-Cookie" not in r.headers
    async with c.get("/dashboard/tools", allow_redirects=False) as r:
        assert r.status == 401


async def test_the_token_becomes_a_strict_httponly_session_cookie(dash):
    _, d = dash
    assert os.stat(d.home / "dashboard.token").st_mode & 0o777 == 0o600
    c = d.client()
    async with c.get("/dashboard/login", params={"token": d.token}, allow_redirects=False) as r:
        # A page that moves on by itself, so the next request is same-site even when a link in another
        # site's page started the login (a redirect would lose the Strict cookie there).
        assert r.status == 200 and '<meta http-equiv="refresh" content="0;url=/dashboard/">' in await r.text()
        cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie
    assert d.token not in cookie
    for name in PAGES:
        async with c.get(f"/dashboard/{name}", allow_redirects=False) as r:
            assert r.status == 200, name
            assert r.headers["Cache-Control"] == "no-store"
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
            assert "<script" not in await r.text()
    # A restart forgets sessions but keeps the token.
    token = d.token
    await d.dashboard.stop()
    await d.dashboard.start()
    assert d.token == token


async def test_post_without_the_csrf_token_is_refused_and_changes_nothing(dash, model):
    harness, d = dash
    approval_id = await held_task(harness, model)
    c = await d.login()
    url = f"/dashboard/approvals/{approval_id}/decide"
    for form in ({"decision": "approve"}, {"decision": "approve", "csrf": "guess"},
                 {"decision": "approve", "csrf": ""}):
        async with c.post(url, data=form, allow_redirects=False) as r:
            assert r.status == 403, form
    # The session's CSRF token is worthless without the session (another browser, a stranger).
    csrf = d.csrf(await d.page(c, "/dashboard/approvals"))
    async with d.client().post(url, data={"decision": "approve", "csrf": csrf}, allow_redirects=False) as r:
        assert r.status == 401
    # Nor does a GET or another method decide anything.
    async with c.get(url, allow_redirects=False) as r:
        assert r.status == 405
    async with c.put(url, data={"decision": "approve", "csrf": csrf}, allow_redirects=False) as r:
        assert r.status == 405
    await harness.gw.idle()
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and rec.state == "pending"
    assert await harness.gw.store.run(lambda db: db["tasks"].count) == 0


async def test_approve_from_the_dashboard_runs_once_and_edits_the_chat_prompt(dash, model):
    harness, d = dash
    approval_id = await held_task(harness, model, "<b>call</b> the <script>bank</script>")
    c = await d.login()
    page = await d.page(c, "/dashboard/approvals")
    # The preview is shown verbatim, escaped: the model's text is never markup.
    assert html.escape("title: <b>call</b> the <script>bank</script>", quote=False) in page
    assert "<script>bank" not in page
    csrf = d.csrf(page)
    url = f"/dashboard/approvals/{approval_id}/decide"
    answers = []
    for _ in range(2):  # a double click
        async with c.post(url, data={"decision": "approve", "csrf": csrf}, allow_redirects=True) as r:
            assert r.status == 200
            answers.append(await r.text())
    await harness.gw.idle()
    assert "Approved; running it now." in answers[0] and "Already " in answers[1]
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and rec.state == "succeeded" and rec.decided_by == "dashboard:owner"
    assert await harness.gw.store.run(lambda db: db["tasks"].count) == 1
    out = harness.new_output()
    assert "(update to message" in out and "✅ Approved — done by dashboard:owner: task_create" in out
    decided = await d.page(c, "/dashboard/approvals")
    assert f'id="decided-{approval_id}"' in decided and "dashboard:owner" in decided
    assert "Nothing is waiting for approval." in decided


async def test_deny_with_a_reason(dash, model):
    harness, d = dash
    approval_id = await held_task(harness, model)
    c = await d.login()
    csrf = d.csrf(await d.page(c, "/dashboard/approvals"))
    async with c.post(f"/dashboard/approvals/{approval_id}/decide",
                      data={"decision": "deny", "reason": "not today", "csrf": csrf}) as r:
        assert "Denied." in await r.text()
    await harness.gw.idle()
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and (rec.state, rec.reason, rec.decided_by) == ("denied", "not today", "dashboard:owner")
    assert "🚫 Denied by dashboard:owner: task_create" in harness.new_output()
    assert await harness.gw.store.run(lambda db: db["tasks"].count) == 0


async def test_tools_page_shows_policies_effective_overrides_and_why_not(dash):
    _, d = dash
    page = await d.page(await d.login(), "/dashboard/tools")
    row = re.search(r'<tr id="tool-task_create">.*?</tr>', page, re.S)
    assert row and "<strong class=\"warn\">confirm / none</strong>" in row.group(0) and "(override)" in row.group(0)
    row = re.search(r'<tr id="tool-email_send">.*?</tr>', page, re.S)
    assert row and '<span class="pill confirm">confirm</span>' in row.group(0)
    email = re.search(r'<section class="card" id="toolset-email">.*?</h2>\s*<p>.*?</p>', page, re.S)
    assert email and "not available" in email.group(0) and "add a [email] section" in email.group(0)
    tasks = re.search(r'<section class="card" id="toolset-tasks">.*?</h2>', page, re.S)
    assert tasks and "available" in tasks.group(0) and "not available" not in tasks.group(0)
    assert re.search(r"bytes\)", page)
    # who gets what: [access] guest_toolsets, not just a toolset's own flag
    web = re.search(r'<section class="card" id="toolset-web">.*?</h2>', page, re.S)
    assert web and "shared with guests" in web.group(0)
    assert "shared with guests" not in email.group(0)


async def test_toolsets_page_shows_the_last_selection_and_its_size(dash, model):
    harness, d = dash
    model.script(reply("Sure."))
    await harness.say("put milk on my task list")
    page = await d.page(await d.login(), "/dashboard/toolsets")
    row = re.search(r"<code>console:local</code>.*?</tr>", page, re.S)
    assert row, page
    assert "<strong>tasks</strong>: keyword &#39;task&#39;" in row.group(0) and "automatic" in row.group(0)
    # The bytes are those of the tools array the model received.
    sent = model.requests[-1].tool_names
    assert sent[0] == "load_toolsets" and "task_create" in sent
    tools = {t.name: t for ts in harness.gw.toolsets for t in ts.tools}
    loader = loader_tool(harness.gw.runtime.available())
    expected = schema_bytes([loader, *(tools[n] for n in sent[1:])])
    assert f"{expected} bytes" in row.group(0)


async def test_automations_pause_resume_delete_through_the_service(dash):
    harness, d = dash
    service = harness.gw.services["automations"]
    rec = await service.create("console:owner", harness.console.origin, "stretch",
                               Interval(type="every", mode="interval", interval="2h"),
                               Reminder(kind="reminder", text="stand up"))
    c = await d.login()
    page = await d.page(c, "/dashboard/automations")
    assert "stretch" in page and "every 2h" in page
    local_next = datetime.fromisoformat(rec.next_run_at).astimezone(harness.gw.config.tz).strftime("%Y-%m-%d %H:%M")
    assert local_next in page
    csrf = d.csrf(page)
    async with c.post(f"/dashboard/automations/{rec.id}/pause", data={"csrf": csrf}) as r:
        assert "Paused" in await r.text()
    paused = await service.repo.get(rec.id)
    assert paused is not None and not paused.enabled and paused.next_run_at is None
    async with c.post(f"/dashboard/automations/{rec.id}/resume", data={"csrf": csrf}) as r:
        assert "Resumed" in await r.text()
    resumed = await service.repo.get(rec.id)
    assert resumed is not None and resumed.enabled and resumed.next_run_at is not None
    async with c.post(f"/dashboard/automations/{rec.id}/delete", data={}) as r:
        assert r.status == 403  # no CSRF, no delete
    async with c.post(f"/dashboard/automations/{rec.id}/delete", data={"csrf": csrf}) as r:
        assert "Deleted" in await r.text()
    assert await service.repo.get(rec.id) is None
    actors = {(e.actor, e.action) for e in await Audit(harness.gw.store).list()}
    assert {("dashboard:owner", "automation.update"), ("dashboard:owner", "automation.delete")} <= actors


async def test_sessions_page_searches_history_with_the_session_search_fts(dash, model):
    harness, d = dash
    model.script(reply("Noted."))
    await harness.say("the dentist appointment is on friday")
    c = await d.login()
    page = await d.page(c, "/dashboard/sessions", q="dentist friday")
    assert "1 message matching" in page and "[dentist] appointment is on [friday]" in page
    assert "0 messages matching" in await d.page(c, "/dashboard/sessions", q="plumber")
    # FTS syntax in the box is just text.
    assert "0 messages matching" in await d.page(c, "/dashboard/sessions", q='dentist" OR "x')
    assert "<code>console:local</code>" in page
    # Terms under three characters (Chinese words, often) take the LIKE path, over every user too.
    model.script(reply("好的。"))
    await harness.say("周五去看牙医")
    assert "1 message matching" in await d.page(c, "/dashboard/sessions", q="牙医")


async def test_audit_filters_by_tool_and_time(dash, model):
    harness, d = dash
    audit = Audit(harness.gw.store)
    old = iso(utcnow() - timedelta(days=3))
    await audit.add(AuditEvent(at=old, actor="console:owner", action="tool.run", tool="task_create", subject="old"))
    await audit.add(AuditEvent(actor="console:owner", action="tool.run", tool="email_send", subject="recent-mail"))
    await audit.add(AuditEvent(actor="console:owner", action="tool.run", tool="task_create", subject="recent-task"))
    c = await d.login()
    only_tasks = await d.page(c, "/dashboard/audit", tool="task_create")
    assert "recent-task" in only_tasks and "old" in only_tasks and "recent-mail" not in only_tasks
    since = (datetime.now(harness.gw.config.tz) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    recent_tasks = await d.page(c, "/dashboard/audit", tool="task_create", since=since)
    assert "recent-task" in recent_tasks and ">old<" not in recent_tasks and " old " not in recent_tasks
    until = (datetime.now(harness.gw.config.tz) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    before = await d.page(c, "/dashboard/audit", until=until)
    assert "old" in before and "recent-task" not in before
    async with c.get("/dashboard/audit", params={"since": "yesterday"}) as r:
        assert r.status == 400 and "since: 'yesterday' is not a date and time" in await r.text()


async def test_health_counts_model_errors_and_shows_surfaces_and_backlog(dash, model):
    harness, d = dash
    c = await d.login()
    page = await d.page(c, "/dashboard/health")
    assert re.search(r"<td>console</td><td class=\"ok\">✓ up</td>", page)
    assert re.search(r"model errors, last hour</td><td class=\"ok\">0<", page)
    assert "Everything has been delivered." in page
    model.script(status(500), status(500), status(500))
    await harness.say("hello")
    page = await d.page(c, "/dashboard/health")
    assert re.search(r"model errors, last hour</td><td class=\"bad\">1<", page), page


class FakeMcp:
    """A service that reports its own health, as the MCP client will."""

    async def health(self):
        return [("mcp:files", True, "connected, 3 tools"), ("mcp:broken", False, "connection refused")]


async def test_health_shows_what_services_report_about_themselves(dash):
    harness, d = dash
    harness.gw.services["mcp"] = FakeMcp()
    page = await d.page(await d.login(), "/dashboard/health")
    assert "<h2>mcp</h2>" in page and "✓ connected, 3 tools" in page and "✗ connection refused" in page


def test_listen_must_be_loopback_unless_allow_remote():
    with pytest.raises(ConfigError, match=r"\[dashboard\] listen = '0.0.0.0:8765' is not a loopback address"):
        parse_config({"dashboard": {"listen": "0.0.0.0:8765"}})
    with pytest.raises(ConfigError, match="not a loopback"):
        parse_config({"dashboard": {"listen": "example.com:8765"}})
    with pytest.raises(ConfigError, match=r"must be HOST:PORT"):
        parse_config({"dashboard": {"listen": "8765"}})
    with pytest.raises(ConfigError, match=r"\[dashboard.port\] unknown key"):
        parse_config({"dashboard": {"port": 1}})
    assert parse_config({"dashboard": {"listen": "0.0.0.0:8765", "allow_remote": True}}).dashboard.port == 8765
    assert parse_config({"dashboard": {"listen": "[::1]:9000"}}).dashboard.host == "::1"
    cfg = parse_config({}).dashboard
    assert (cfg.enabled, cfg.listen, cfg.allow_remote) == (True, "127.0.0.1:8765", False)
