"""The subagents toolset: hand work to a child turn with its own fresh context.

`delegate_task` waits for the child and returns its summary; `background_job` returns a job id at once
and the summary arrives in the chat later. The child sees only the task (and optional context), never
the parent's memory or transcript, and only the toolsets it was given. The gateway's subagent service
(`ctx.service("subagents")`) runs the children and enforces depth, concurrency and authority limits.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from store.records import SubagentJob
from toolsets.base import Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "subagents",
    "hand a task to a helper that works on its own (now, or in the background) and reports back",
    keywords=(
        r"\bin the background\b", r"\bbackground (?:job|task)\b", r"\bdelegate\b", r"\bsubagents?\b",
        r"\b(?:research|look into|investigate|dig into)\b.{0,60}\b(?:and (?:tell|get back|report)|tonight|later)\b",
        r"\b(?:and|then) get back to me\b", r"\breport back\b",
        r"\bwhile i (?:drive|sleep|work|walk|cook|am out|'m out)\b", r"\bjobs?\b.{0,20}\b(?:status|running|cancel)\b",
        r"\b(?:cancel|stop|kill)\b.{0,30}\bjobs?\b", r"后台", r"委托", r"子任务", r"回头告诉我", r"查完告诉我",
        r"帮我调研",
    ),
    requires="subagents",
)


class SubagentsAPI(Protocol):
    """What these tools need from the gateway's subagent service."""

    async def delegate(self, parent: ToolContext, task: str, toolsets: builtins.list[str] | None,
                       context: str) -> str: ...
    async def start(self, parent: ToolContext, task: str, toolsets: builtins.list[str] | None) -> SubagentJob: ...
    async def list(self, parent: ToolContext) -> builtins.list[SubagentJob]: ...
    async def history(self, parent: ToolContext, job_id: str) -> builtins.list[dict[str, Any]]: ...
    async def cancel(self, parent: ToolContext, job_id: str) -> SubagentJob: ...


def _service(ctx: ToolContext) -> SubagentsAPI:
    service: SubagentsAPI | None = ctx.service("subagents")
    if service is None:
        raise ToolError("subagents are not available in this runtime")
    return service


def _brief(job: SubagentJob) -> str:
    facts = (f"{job.id} [{job.state}] {job.mode}, toolsets {', '.join(job.toolsets) or 'none'}, started "
             f"{job.created_at[:19]}Z" + (f", finished {job.finished_at[:19]}Z" if job.finished_at else ""))
    return f"{facts}\ntask: {job.task[:200]}"


def _report(ctx: ToolContext, job: SubagentJob) -> str:
    """A job's line, its report quoted as outside content: the helper may have read a web page or an
    email, and its words stay data wherever they reappear (after /new too)."""
    summary = (job.summary or "")[:500]
    return _brief(job) + ("\nreport: " + ctx.external(_source(job.id), summary) if summary else "")


def _source(job_id: str) -> str:
    return f"helper job {job_id}"


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, visible_chars=8000)
async def delegate_task(ctx: ToolContext, task: str, toolsets: list[str] | None = None, context: str = "") -> str:
    """Give a self-contained task to a helper and wait for its summary. The helper starts fresh: put
    everything it needs in `task` and `context`.

    Args:
        task: What the helper should do and what to report, e.g. "Find three flights LIS->BER on Friday".
        toolsets: Toolsets the helper may use (default: the read-only ones), e.g. ["web"].
        context: Facts from this conversation the helper needs.
    """
    # The helper may have read outside content (a web page, an email): its summary is quoted as data, and
    # this turn then counts as having read outside content.
    return ctx.external("subagent summary", await _service(ctx).delegate(ctx, task, toolsets, context))


@TOOLSET.tool(risk=Risk.RUNTIME_LOW)
async def background_job(ctx: ToolContext, task: str, toolsets: list[str] | None = None) -> dict[str, str]:
    """Start a helper on a task in the background; returns its background_job_id at once. Its summary
    arrives in this chat when it is done.

    Args:
        task: The self-contained task and what to report.
        toolsets: Toolsets the helper may use (default: the read-only ones).
    """
    job = await _service(ctx).start(ctx, task, toolsets)
    return {"background_job_id": job.id, "state": job.state}


@TOOLSET.tool()
async def subagent_list(ctx: ToolContext) -> str:
    """List the helpers this conversation started, newest first, with their state and report."""
    jobs = await _service(ctx).list(ctx)
    return "\n\n".join(_report(ctx, j) for j in jobs) if jobs else "No helpers were started in this conversation."


@TOOLSET.tool(visible_chars=8000)
async def subagent_history(ctx: ToolContext, id: str) -> str:
    """The transcript of one helper started by this conversation.

    Args:
        id: The job id (background_job_id).
    """
    lines = []
    for entry in await _service(ctx).history(ctx, id):
        head = entry["role"] + (f" ({entry['tool']})" if "tool" in entry else "")
        if entry.get("tool_calls"):
            head += f" called {', '.join(entry['tool_calls'])}"
        lines.append(f"{head}: {entry['text']}")
    # The whole transcript is the helper's: its words and what its tools brought in.
    return ctx.external(_source(id), "\n".join(lines)) if lines else f"helper {id} has no transcript yet"


@TOOLSET.tool(risk=Risk.RUNTIME_LOW)
async def subagent_cancel(ctx: ToolContext, id: str) -> str:
    """Stop a running helper started by this conversation.

    Args:
        id: The job id (background_job_id).
    """
    return _brief(await _service(ctx).cancel(ctx, id))
