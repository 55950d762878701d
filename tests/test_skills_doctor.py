"""A broken SKILL.md is named by its path in the log and in `anyy doctor`; the Agent Skills name rules hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.skills import SkillError, parse_skill
from tests.support.cli import anyy, write_config

GOOD = "---\nname: file-expenses\ndescription: File an expense report.\n---\nSteps.\n"


def skill(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_text(text)
    return root / folder / "SKILL.md"


async def test_doctor_and_the_log_name_each_broken_skill(tmp_path, home, model):
    root = tmp_path / "skills"
    skill(root, "file-expenses", GOOD)
    trailing = skill(root, "bad-", "---\nname: bad-\ndescription: x\n---\n")
    elsewhere = skill(root, "mismatch", "---\nname: other\ndescription: x\n---\n")
    broken = skill(root, "broken", "no front matter here\n")
    cfg = write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\nmax_retries = 0\n'
                                 f'[skills]\nroots = ["{root}"]\n')
    code, out, _ = await anyy("doctor", "--config", cfg, env=home)
    assert code == 1, out
    assert "✓ skills: 1 skill(s): file-expenses" in out
    assert f"✗ skills: {trailing}: name 'bad-' must be" in out
    assert f"✗ skills: {elsewhere}: name 'other' must be the folder's name, 'mismatch'" in out
    assert f"✗ skills: {broken}: no YAML front matter" in out
    code, _, err = await anyy("chat", "--config", cfg, env=home, stdin="hello\n")
    assert code == 0 and f"skill_unreadable path={broken}" in err, err


@pytest.mark.parametrize("name", ["-lead", "trail-", "dou--ble", "Upper", "x" * 65])
def test_agent_skills_name_rules(tmp_path, name):
    with pytest.raises(SkillError, match="must be 1-64 lower-case"):
        parse_skill(f"---\nname: {name}\ndescription: d\n---\n", tmp_path / name, managed=False)
