"""The dashboard's memory (edit, delete, audited), tasks, skills and MCP pages, and the audit page in words,
through HTTP with the session cookie and CSRF token as a browser sends them."""

from __future__ import annotations

from pathlib import Path

from store.audit import Audit
from store.memory import Memory
from store.tasks import Tasks


async def test_memory_can_be_edited_and_deleted_and_both_are_audited(dashboard_config, start_console,
                                                                     start_dashboard):
    harness = await start_console(dashboard_config())
    d = await start_dashboard(harness)
    repo = Memory(harness.gw.store)
    kept = await repo.add("console:owner", "user", "Prefers tea")
    gone = await repo.add("telegram:42", "notes", "Asked about <b>bikes</b>")
    client = await d.login()
    page = await d.page(client, "/dashboard/memory")
    assert "Prefers tea" in page and "&lt;b&gt;bikes&lt;/b&gt;" in page and "telegram:42" in page
    csrf = d.csrf(page)
    async with client.post(f"/dashboard/memory/{kept.id}/edit", data={"csrf": csrf, "content": "Prefers green tea"},
                           allow_redirects=False) as r:
        assert r.status == 303
    async with client.post(f"/dashboard/memory/{gone.id}/delete", data={"csrf": "forged"}) as r:
        assert r.status == 403  # no CSRF token, no change
    async with client.post(f"/dashboard/memory/{gone.id}/delete", data={"csrf": csrf}) as r:
        assert r.status == 200 and f"Deleted entry {gone.id} of telegram:42." in await r.text()
    async with client.post(f"/dashboard/memory/{kept.id}/edit", data={"csrf": csrf, "content": "x" * 5000}) as r:
        assert "is unchanged" in await r.text()
    assert [e.content for e in await repo.list(None)] == ["Prefers green tea"]
    actions = [e.action for e in await Audit(harness.gw.store).list()]
    assert "memory.edit" in actions and "memory.delete" in actions
    audit = await d.page(client, "/dashboard/audit")
    assert "target: notes · user: telegram:42" in audit  # words, not {"target":"notes","user":...}


async def test_tasks_and_skills_pages(dashboard_config, start_console, start_dashboard, tmp_path: Path):
    root = tmp_path / "skills"
    (root / "file-expenses").mkdir(parents=True)
    (root / "file-expenses" / "SKILL.md").write_text("---\nname: file-expenses\ndescription: Monthly receipts.\n---\n")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("no front matter")
    harness = await start_console(dashboard_config(skills={"roots": [str(root)]}))
    d = await start_dashboard(harness)
    await Tasks(harness.gw.store).create("telegram:42", "buy a bike", due="2026-12-24")
    client = await d.login()
    tasks = await d.page(client, "/dashboard/tasks")
    assert "buy a bike" in tasks and "2026-12-24" in tasks and "telegram:42" in tasks
    skills = await d.page(client, "/dashboard/skills")
    assert "file-expenses" in skills and "Monthly receipts." in skills
    assert f"{root / 'broken' / 'SKILL.md'}: no YAML front matter" in skills
    assert "None configured" in skills  # no MCP servers
