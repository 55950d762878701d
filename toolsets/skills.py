"""The skills toolset: written procedures the assistant looks up instead of carrying them in every prompt.

Only skill names and descriptions reach the system prompt (`skills_prompt`); `skill_view` returns a
skill's body or a file beside it. `skill_manage` changes skills in the managed root only, and since a
skill's text later reaches the model as instructions, creating, updating or deleting one waits for the
owner's approval (the preview shows the full text).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from connectors.skills import Skill, SkillError, SkillLibrary
from toolsets.base import ExecutionPolicy, Preview, Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "skills",
    "look up, add or change the owner's written procedures (skills: how to do a recurring task)",
    keywords=(
        r"\bskills?\b", r"\bprocedures?\b", r"\bthe usual way\b", r"\bplaybook\b", r"\brunbook\b",
        r"\bmy checklist\b", r"\bhow i (?:like|want)\b", r"\bmy (?:process|routine)\b", r"\btemplate\b",
        r"\bformat for\b",
        r"技能", r"流程", r"步骤", r"模板", r"规范",
    ),
    requires="skills",
)

VIEW_CHARS = 20_000
PROMPT_SKILLS = 12  # at most this many skills are named in the system prompt
PROMPT_CHARS = 2_000
_WORD = re.compile(r"\w{3,}", re.UNICODE)


def _library(ctx: ToolContext) -> SkillLibrary:
    lib = ctx.service("skills")
    if not isinstance(lib, SkillLibrary):
        raise ToolError("skills are not available in this runtime")
    return lib


T = TypeVar("T")


async def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking library call off the event loop, turning its errors into tool errors."""
    try:
        return await asyncio.to_thread(fn, *args)
    except SkillError as exc:
        raise ToolError(str(exc)) from None


def relevant(skills: list[Skill], text: str, limit: int = PROMPT_SKILLS) -> list[Skill]:
    """The skills most related to `text` (shared words with name and description), then by name."""
    words = {w.casefold() for w in _WORD.findall(text)}

    def score(s: Skill) -> int:
        return len(words & {w.casefold() for w in _WORD.findall(f"{s.name.replace('-', ' ')} {s.description}")})

    return sorted(skills, key=lambda s: (-score(s), s.name))[:limit]


async def skills_prompt(library: SkillLibrary | None, text: str) -> str:
    """The system prompt's skills block: names and descriptions only, bounded ("" with no skills)."""
    if library is None:
        return ""
    skills = list((await asyncio.to_thread(library.skills)).values())
    if not skills:
        return ""
    lines = ["Skills (the owner's written procedures; before doing one of these tasks, read it with skill_view — "
             "load the skills toolset if needed):"]
    size = len(lines[0])
    for s in relevant(skills, text):
        line = f"- {s.name}: {s.description}"
        if size + len(line) > PROMPT_CHARS:
            break
        lines.append(line)
        size += len(line) + 1
    if len(skills) > len(lines) - 1:
        lines.append(f"({len(skills) - len(lines) + 1} more: skills_list)")
    return "\n".join(lines)


@TOOLSET.tool()
async def skills_list(ctx: ToolContext) -> list[dict[str, str]]:
    """List every skill with its description and whether it can be changed (managed) or is read-only."""
    lib = _library(ctx)
    skills = await _call(lib.skills)
    return [{"name": s.name, "description": s.description, "root": "managed" if s.managed else "read-only"}
            for s in sorted(skills.values(), key=lambda s: s.name)]


@TOOLSET.tool(visible_chars=VIEW_CHARS)
async def skill_view(ctx: ToolContext, name: str, file: str | None = None) -> str:
    """Read a skill's instructions (its SKILL.md body), or one file inside the skill's folder.

    Args:
        name: The skill's name, from the skills list.
        file: Optional path of a file inside the skill folder, e.g. "template.md".
    """
    lib = _library(ctx)
    if file:
        return await _call(lib.read_file, name, file, VIEW_CHARS)
    skill: Skill = await _call(lib.get, name)
    return f"# {skill.name}\n{skill.description}\n\n{skill.body[:VIEW_CHARS]}"


Action = Literal["create", "update", "delete", "reload"]


@TOOLSET.tool(risk=Risk.CONFIG_LOW, execution=ExecutionPolicy.CONFIRM, steering=True)
async def skill_manage(ctx: ToolContext, action: Action, name: str = "", description: str = "",
                       body: str = "") -> str:
    """Create, update or delete one of the owner's managed skills, or reload skills from disk.
    Changes wait for the owner's approval.

    Args:
        action: "create", "update", "delete" or "reload".
        name: The skill's name: lower-case letters, digits and '-' (not needed for reload).
        description: One line: when to use the skill (create/update).
        body: The procedure in Markdown (create/update).
    """
    lib = _library(ctx)
    if action == "reload":
        return f"Reloaded: {await _call(lib.reload)} skill(s)."
    if action == "delete":
        await _call(lib.delete, name)
        return f"Deleted skill {name}."
    exists = name in await _call(lib.skills)
    if action == "create" and exists:
        raise ToolError(f"skill {name!r} exists already; use action 'update'")
    if action == "update" and not exists:
        raise ToolError(f"no skill {name!r} to update; use action 'create'")
    if not description.strip() or not body.strip():
        raise ToolError("a skill needs a description and a body")
    path = await _call(lib.write, name, description.strip(), body)
    return f"Saved skill {name} ({path})."


@skill_manage.call_policy
def _manage_policy(ctx: ToolContext, args: Any) -> ExecutionPolicy:
    # Reloading changes nothing the owner has not already put on disk; every other action waits.
    return ExecutionPolicy.AUDIT if args.action == "reload" else ExecutionPolicy.CONFIRM


@skill_manage.preview
async def _preview_manage(ctx: ToolContext, args: Any) -> Preview:
    if args.action == "delete":
        return Preview(text=f"Delete the skill {args.name}.")
    verb = "Create" if args.action == "create" else "Replace"
    return Preview(text=f"{verb} the skill {args.name}:\n\ndescription: {args.description}\n\n{args.body}")
