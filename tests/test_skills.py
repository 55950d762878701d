"""Skills end to end: folders with SKILL.md, listed and viewed by the model, changed only with approval."""

from pathlib import Path

import pytest

from connectors.skills import SkillError, SkillLibrary, parse_skill
from store.approvals import Approvals
from tests.fixtures.model import reply, tool_call

EXPENSES = """---
name: file-expenses
description: How the owner files expense receipts each month
---
# Filing expenses
1. Collect receipts from the inbox.
2. SECRET-BODY-MARKER: put them in the Expenses sheet.
"""


def write_skill(root: Path, folder: str, text: str, files: dict[str, str] | None = None) -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(text, encoding="utf-8")
    for name, content in (files or {}).items():
        (d / name).write_text(content, encoding="utf-8")
    return d


@pytest.fixture
def skill_root(tmp_path: Path) -> Path:
    root = tmp_path / "shared-skills"
    write_skill(root, "file-expenses", EXPENSES, {"template.md": "| date | amount |"})
    (tmp_path / "secret.txt").write_text("do not leak")
    return root


@pytest.fixture
async def harness(start_console, make_config, skill_root):
    return await start_console(make_config(skills={"roots": [str(skill_root)]}))


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def test_list_and_view_a_skill_and_a_file(harness, model):
    model.script(tool_call("skills_list", {}), tool_call("skill_view", {"name": "file-expenses"}),
                 tool_call("skill_view", {"name": "file-expenses", "file": "template.md"}), reply("Done."))
    await harness.say("how do I file my expenses? check the skill")
    results = tool_results(model.requests[-1])
    assert '"name":"file-expenses"' in results[0].replace(" ", "") and "read-only" in results[0]
    assert "SECRET-BODY-MARKER" in results[1]
    assert "| date | amount |" in results[2]


async def test_path_escape_is_refused(harness, model):
    model.script(tool_call("skill_view", {"name": "file-expenses", "file": "../../secret.txt"}), reply("No."))
    await harness.say("show the skill file")
    result = tool_results(model.requests[-1])[0]
    assert "outside the skill folder" in result and "do not leak" not in result


async def test_system_prompt_names_skills_without_their_bodies(harness, model):
    model.script(reply("ok"))
    await harness.say("what's on today?")
    context = model.requests[-1].context  # matched to this message: after it, not in the system prompt
    assert "file-expenses: How the owner files expense receipts each month" in context
    assert "SECRET-BODY-MARKER" not in str(model.requests[-1].body)


async def test_an_edited_skill_is_seen_without_a_restart(harness, model, skill_root):
    model.script(reply("ok"))
    await harness.say("hello")
    write_skill(skill_root, "file-expenses", EXPENSES.replace("each month", "every Friday"))
    model.script(reply("ok"))
    await harness.say("hello again")
    assert "files expense receipts every Friday" in model.requests[-1].context


async def test_skill_manage_create_waits_for_approval(harness, model):
    lib: SkillLibrary = harness.gw.services["skills"]
    args = {"action": "create", "name": "weekly-report", "description": "The weekly report format",
            "body": "Three bullets: done, next, blocked."}
    model.script(tool_call("skill_manage", args), reply("I asked for approval."))
    out = await harness.say("save a skill for the weekly report format")
    assert "Approval needed: skill_manage" in out and "Three bullets: done, next, blocked." in out
    assert "weekly-report" not in lib.skills()
    pending = await Approvals(harness.gw.store).list(("pending",))
    out = await harness.say(f"/approve {pending[0].id}")
    assert "✅ Approved — done" in out
    skill = lib.skills()["weekly-report"]
    assert skill.managed and skill.body == "Three bullets: done, next, blocked."
    assert skill.folder.parent == harness.gw.config.data_dir / "skills"


async def test_read_only_skills_cannot_be_changed(harness, model):
    lib: SkillLibrary = harness.gw.services["skills"]
    with pytest.raises(SkillError, match="read-only"):
        lib.write("file-expenses", "x", "y")


def test_bad_front_matter_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="front matter"):
        parse_skill("no front matter", tmp_path, False)
    with pytest.raises(SkillError, match="name"):
        parse_skill("---\nname: Bad Name\ndescription: x\n---\nbody", tmp_path, False)
    lib = SkillLibrary(tmp_path / "managed", [tmp_path / "ro"])
    write_skill(tmp_path / "ro", "broken", "---\nname: [unclosed\n---\n")
    write_skill(tmp_path / "ro", "fine", "---\nname: fine\ndescription: works\n---\nbody")
    assert list(lib.skills()) == ["fine"] and len(lib.problems) == 1


async def test_reload_runs_at_once(harness, model):
    model.script(tool_call("skill_manage", {"action": "reload"}), reply("Reloaded."))
    out = await harness.say("reload the skills")
    assert "Approval needed" not in out and "Reloaded." in out
    assert await Approvals(harness.gw.store).list(("pending",)) == []
    assert "Reloaded: 1 skill(s)." in next(m["content"] for m in model.requests[-1].messages if m["role"] == "tool")
