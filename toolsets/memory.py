"""The memory toolset: one `memory` tool that edits the user's long-term memory, and the prompt block
that shows that memory to the model every turn.

Memory is per user (`ctx.user_key`); nothing here reads another user's entries. Its size is capped as
rendered into the system prompt, so what the tool accepts is exactly what the prompt can hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from store.db import Store
from store.memory import Memory
from store.records import MemoryEntry
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "memory",
    "save, correct or forget long-term facts about the user",
    keywords=(
        r"\bremember\b", r"\bforget\b", r"\bkeep (?:that|this|it) in mind\b", r"\bnote (?:that|down|for)\b",
        r"\bsave (?:this|that)\b(?! (?:as|in|to) (?:a |an |the |my )?(?:skill|file|procedure|template|task|to-?do))",
        r"\b(?:for the future|from now on|going forward)\b",
        r"\bcall(?:ing)? me\b(?! (?:at|in|back|when|tomorrow|tonight|later|on)\b)", r"\bmy name\b", r"\babout me\b",
        r"\b(?:allergic|intolerant|vegetarian|vegan)\b", r"\bi (?:prefer|hate|love|don'?t (?:eat|drink|like))\b",
        r"\bi (?:moved|live|work)\b", r"\bmy (?:wife|husband|partner|kids|children|son|daughter|birthday)\b", r"记住",
        r"记一下", r"记下", r"别忘", r"忘掉", r"忘了", r"过敏", r"我不吃", r"我不喝", r"我喜欢", r"我讨厌", r"我住",
        r"搬到", r"以后", r"从现在起", r"关于我", r"(?<!点)叫我", r"我的名字",
    ),
)

DEFAULT_MAX_CHARS = 4000

_HEADINGS = {"user": "About the user:", "notes": "Your notes:"}


@dataclass(frozen=True)
class MemoryLimits:
    """The `memory` service the gateway provides: the size cap from config (runtime.memory_max_chars)."""

    max_chars: int = DEFAULT_MAX_CHARS


def render(entries: list[MemoryEntry]) -> str:
    """The memory block as the system prompt shows it (empty when there is nothing)."""
    blocks = []
    for target, heading in _HEADINGS.items():
        lines = [f"- {e.content}" for e in entries if e.target == target]
        if lines:
            blocks.append("\n".join([heading, *lines]))
    return "\n\n".join(blocks)


async def memory_prompt(store: Store, user_key: str, max_chars: int) -> str:
    """The user's memory for the system prompt, at most `max_chars` long ("" when there is none)."""
    return memory_block(await Memory(store).list(user_key), max_chars)


def memory_block(entries: list[MemoryEntry], max_chars: int) -> str:
    """`memory_prompt` of entries the caller read (a turn reads them in its start's transaction).

    The tool keeps memory under the cap; if the cap was lowered since, the oldest entries are left out.
    """
    while entries and len(render(entries)) > max_chars:
        entries = entries[1:]
    return render(entries)


def _cap(ctx: ToolContext) -> int:
    limits = ctx.service("memory")
    return limits.max_chars if isinstance(limits, MemoryLimits) else DEFAULT_MAX_CHARS


def _fit(current: list[MemoryEntry], proposed: list[MemoryEntry], cap: int) -> str:
    """Refuse a change that would push memory over the cap; otherwise say how full it will be."""
    size = len(render(proposed))
    if size > cap:
        raise ToolError(
            f"memory is full: {len(render(current))} of {cap} characters used, this change would make it {size}. "
            "Replace or remove old entries first, or save something shorter."
        )
    return f"{size}/{cap} characters used"


def _find(entries: list[MemoryEntry], target: str, old_text: str) -> MemoryEntry:
    if not old_text.strip():
        raise ToolError("old_text is required for replace and remove: the exact text to change")
    matches = [e for e in entries if e.target == target and old_text in e.content]
    if not matches:
        raise ToolError(f"old_text not found in {target} memory; copy it exactly from the memory shown to you")
    if len(matches) > 1:
        raise ToolError(f"old_text matches {len(matches)} {target} entries; give a longer, unique piece of text")
    return matches[0]


def _without(content: str, old_text: str) -> str:
    head, _, tail = content.partition(old_text)
    return " ".join(p for p in (head.strip(), tail.strip()) if p)


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT, steering=True)
async def memory(
    ctx: ToolContext,
    action: Literal["add", "replace", "remove"],
    target: Literal["user", "notes"],
    content: str = "",
    old_text: str = "",
) -> str:
    """Edit long-term memory (shown to you every turn). Keep entries short and durable.

    Args:
        action: add content; replace old_text with content; remove old_text.
        target: user: facts about the user; notes: your own notes.
        content: New text (add, replace).
        old_text: Exact existing text to change (replace, remove).
    """
    repo = Memory(ctx.store)
    entries = await repo.list(ctx.user_key)
    cap = _cap(ctx)
    content = content.strip()
    if action == "add":
        if not content:
            raise ToolError("content is empty; give the fact to remember")
        if any(e.target == target and e.content == content for e in entries):
            return f"already in {target} memory"
        new_entry = MemoryEntry(id=0, user_key=ctx.user_key, target=target, content=content, created_at="")
        usage = _fit(entries, [*entries, new_entry], cap)
        await repo.add(ctx.user_key, target, content)
        return f"added to {target} memory ({usage})"
    entry = _find(entries, target, old_text)
    if action == "replace":
        if not content:
            raise ToolError("content is empty; use action remove to delete text")
        new = entry.content.replace(old_text, content, 1)
        usage = _fit(entries, [e.model_copy(update={"content": new}) if e is entry else e for e in entries], cap)
        await repo.set_content(entry.id, new)
        return f"replaced in {target} memory ({usage})"
    remaining = _without(entry.content, old_text)
    if remaining:
        await repo.set_content(entry.id, remaining)
    else:
        await repo.remove(entry.id)
    return f"removed from {target} memory"
