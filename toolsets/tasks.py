"""The tasks toolset: durable personal tasks (title, notes, due date, status), one list per user."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from store.records import TaskRecord
from store.tasks import Tasks
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset
from toolsets.limits import Notes, Title

TOOLSET = Toolset(
    "tasks",
    "personal to-do list: add, list, change, complete tasks",
    keywords=(
        r"(?<!background )\btasks?\b", r"\btodos?\b(?!\.\w)", r"\bto-dos?\b", r"\bchecklist\b",
        r"\b(?:my|the|shopping|grocery) list\b", r"\b(?:backlog|errands?|chores?|deadlines?|overdue)\b",
        r"\bdue\b(?! to)", r"\bon my plate\b", r"\bpending\b", r"\bjot (?:down|this|that|it)\b",
        r"\b(?:let'?s|help me) plan (?:my|the|our) (?:day|morning|afternoon)\b",
        r"\b(?:left|still) (?:for me )?to do\b", r"\b(?:need|have|got) to\b", r"\bgotta\b",
        r"\b(?:tick|cross|check) (?:it|that|this|them)? ?off\b", r"\bmark\b.{0,40}\b(?:done|complete)",
        r"\b(?:done with|are done|is done|finished|completed?)\b", r"\bclose (?:that|this|it)\b", r"\breopen\b",
        r"任务", r"待办", r"清单", r"要做", r"做完", r"完成", r"办完", r"还剩(?:哪些|什么|几件|多少件|多少事)",
        r"没做", r"截止", r"到期", r"事项", r"杂事",
    ),
)

def _view(task: TaskRecord) -> dict[str, Any]:
    """What the model sees of a task: no owner, no bookkeeping timestamps."""
    return task.model_dump(include={"id", "title", "notes", "due", "status"}, exclude_none=True)


async def _update(ctx: ToolContext, task_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    # The store matches id and owner together, so another user's task id reads as unknown.
    task = await Tasks(ctx.store).update(ctx.user_key, task_id, **changes)
    if task is None:
        raise ToolError(f"no task {task_id}; task_list shows your task ids")
    return _view(task)


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def task_create(ctx: ToolContext, title: Title, notes: Notes = "", due: date | None = None) -> dict[str, Any]:
    """Add a task to the user's list.

    Args:
        title: What to do, short.
        notes: Details.
        due: Due date.
    """
    if not title.strip():
        raise ToolError("title is empty; give the task a short title")
    task = await Tasks(ctx.store).create(ctx.user_key, title.strip(), notes, due.isoformat() if due else None)
    return _view(task)


@TOOLSET.tool()
async def task_list(ctx: ToolContext, status: Literal["open", "done", "all"] = "open") -> list[dict[str, Any]]:
    """The user's tasks, soonest due first.

    Args:
        status: Which tasks.
    """
    tasks = await Tasks(ctx.store).list(ctx.user_key, None if status == "all" else status)
    return [_view(t) for t in tasks]


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def task_update(
    ctx: ToolContext,
    task_id: int,
    title: Title | None = None,
    notes: Notes | None = None,
    due: date | None = None,
    clear_due: bool = False,
    status: Literal["open", "done"] | None = None,
) -> dict[str, Any]:
    """Change a task; only the given fields change.

    Args:
        task_id: Id from task_list.
        title: New title.
        notes: New notes (replaces the old).
        due: New due date.
        clear_due: Remove the due date.
        status: Reopen or close.
    """
    changes: dict[str, Any] = {}
    if title is not None:
        if not title.strip():
            raise ToolError("title is empty; leave it out to keep the current title")
        changes["title"] = title.strip()
    if notes is not None:
        changes["notes"] = notes
    if due is not None and clear_due:
        raise ToolError("give either due or clear_due, not both")
    if due is not None or clear_due:
        changes["due"] = due.isoformat() if due else None
    if status is not None:
        changes["status"] = status
    if not changes:
        raise ToolError("nothing to change; give title, notes, due, clear_due or status")
    return await _update(ctx, task_id, changes)


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def task_complete(ctx: ToolContext, task_id: int) -> dict[str, Any]:
    """Mark a task done.

    Args:
        task_id: Id from task_list.
    """
    return await _update(ctx, task_id, {"status": "done"})
