"""The subagent service: child turns for `delegate_task` and `background_job`.

A child is a model turn in its own session (`subagent:<job id>`), for the same user and chat as its
parent, with a fresh context: the task text and optional context, no memory and no parent transcript. It
sees only the toolsets it was given — a subset of what its user may use, read-only ones by default,
never `clarify` (nobody is there to answer), never `skill_manage`, and `subagents` only while the depth
limit allows. A child counts the outside content its parent had read as read, so a task written from an
email cannot slip a memory or automation write past the owner. Its tool calls go through the same policy
as any other: a held call becomes a normal approval prompt to the owner that names the job. Every job is
a row; a job found running after a crash is reported to the owner as interrupted and never re-run.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from gateway.automations.background import Background
from gateway.config import SubagentsConfig
from store.db import Store
from store.leases import lease_until, owner_alive
from store.messages import Messages
from store.records import Outbound, SessionRecord, SubagentJob, iso, parse_iso, utcnow
from store.sessions import Sessions
from store.subagents import SubagentJobs
from toolsets.base import Risk, ToolContext, ToolError, Toolset
from toolsets.untrusted import new_boundary, wrap

log = logging.getLogger(__name__)

CHILD_PREFIX = "subagent:"
NEVER_FOR_CHILDREN = {"clarify"}
CHILD_STRIPPED_TOOLS = {"skill_manage"}
SUBAGENTS = "subagents"
MAX_TASK_CHARS = 8_000
CANCEL_POLL_S = 2.0  # how soon a background job cancelled by another process stops here


Enqueue = Callable[[Outbound, str | None], Awaitable[int]]


class TurnRunner(Protocol):
    """What a helper needs of the turn loop (the runtime implements it)."""

    sessions: Sessions

    async def offered(self, user_key: str) -> list[Toolset]: ...

    async def within_session(self, session: SessionRecord, toolsets: list[Toolset]) -> list[Toolset]: ...

    async def model_turn(self, session: SessionRecord, turn_id: str, *, user_text: str | None = ...,
                         only: list[Toolset] | None = ..., max_rounds: int | None = ..., with_memory: bool = ...,
                         max_tokens: int | None = ..., tainted_by: list[str] = ...) -> str | None: ...

    def resume(self, session_id: str, event: str, dedupe: str, tainted_by: list[str] = ...) -> None: ...


def read_only(ts: Toolset) -> bool:
    return bool(ts.tools) and all(t.descriptor.risk is Risk.READ for t in ts.tools)


class SubagentService:
    """Implements `toolsets.subagents.SubagentsAPI`. `turns` returns the turn loop (built after the
    services, so it is looked up when a helper starts)."""

    def __init__(self, store: Store, config: SubagentsConfig, enqueue: Enqueue,
                 turns: Callable[[], TurnRunner]) -> None:
        self.store = store
        self.config = config
        self.enqueue = enqueue
        self.turns = turns
        self.jobs = SubagentJobs(store)
        self._running: dict[str, asyncio.Future[None]] = {}
        self._background = Background()

    # -- starting children ------------------------------------------------------------------------

    async def delegate(self, parent: ToolContext, task: str, toolsets: list[str] | None, context: str) -> str:
        job, chosen = await self._open(parent, task, toolsets, "sync")
        text = task if not context.strip() else f"{task}\n\nContext from the requester:\n{context}"
        return await self._run(job, chosen, text, _taint(parent))

    async def start(self, parent: ToolContext, task: str, toolsets: list[str] | None) -> SubagentJob:
        job, chosen = await self._open(parent, task, toolsets, "background")
        self._running[job.id] = self._background.spawn(self._run_background(job, chosen, _taint(parent)))
        return job

    async def _open(self, parent: ToolContext, task: str, requested: list[str] | None,
                    mode: str) -> tuple[SubagentJob, list[Toolset]]:
        if not task.strip():
            raise ToolError("the task is empty: say what the helper should do and report")
        if len(task) > MAX_TASK_CHARS:
            raise ToolError(f"the task is {len(task)} characters; keep it under {MAX_TASK_CHARS}")
        depth = await self._depth_of(parent.session_id) + 1
        if depth > self.config.max_depth:
            raise ToolError(f"helpers may not start helpers beyond depth {self.config.max_depth}")
        chosen = await self._toolsets_for(parent, requested, depth)
        job_id = f"j{secrets.token_hex(5)}"
        job = SubagentJob(id=job_id, parent_session_id=parent.session_id, child_session_id=CHILD_PREFIX + job_id,
                          user_key=parent.user_key, origin=parent.origin, task=task.strip(),
                          toolsets=[ts.name for ts in chosen], depth=depth, mode=mode,  # type: ignore[arg-type]
                          owner_pid=os.getpid(), owner=self.jobs.store.owner, created_at=iso(utcnow()),
                          lease_until=lease_until(self.jobs.store.now()))
        if not await self.jobs.create_if_room(job, self.config.max_concurrent):
            raise ToolError(f"{self.config.max_concurrent} helpers are already running for you; wait for one to "
                            "finish or cancel one (subagent_cancel)")
        log.info("subagent_started job=%s mode=%s depth=%d toolsets=%s", job.id, mode, depth, ",".join(job.toolsets))
        return job, chosen

    async def _depth_of(self, session_id: str) -> int:
        if not session_id.startswith(CHILD_PREFIX):
            return 0
        job = await self.jobs.by_child_session(session_id)
        return job.depth if job else 0

    async def _toolsets_for(self, parent: ToolContext, requested: Sequence[str] | None, depth: int) -> list[Toolset]:
        """The child's toolsets: at most what the parent's turns may have (its user's role, cut to its
        session's: an automation's turn never hands its helper the automation toolset), minus what
        children never get."""
        turns = self.turns()
        session = await turns.sessions.get(parent.session_id)
        offered = await turns.within_session(session, await turns.offered(parent.user_key)) if session else []
        usable = {ts.name: ts for ts in offered
                  if ts.name not in NEVER_FOR_CHILDREN and (ts.name != SUBAGENTS or depth < self.config.max_depth)}
        if requested is None:
            names = [n for n, ts in usable.items() if read_only(ts)]
        else:
            unknown = [n for n in requested if n not in usable]
            if unknown:
                raise ToolError(f"a helper cannot use {', '.join(unknown)}; it may use: {', '.join(usable)}")
            names = list(dict.fromkeys(requested))
        return [_without(usable[n], CHILD_STRIPPED_TOOLS) for n in usable if n in names]

    # -- running ----------------------------------------------------------------------------------

    async def _run(self, job: SubagentJob, toolsets: list[Toolset], text: str, tainted_by: list[str]) -> str:
        runtime = self.turns()
        session = await runtime.sessions.get_or_create(job.child_session_id, job.origin, job.user_key, kind="subagent")
        try:
            summary = await runtime.model_turn(session, f"job-{job.id}", user_text=text, only=toolsets,
                                               max_rounds=self.config.max_rounds, with_memory=False,
                                               max_tokens=self.config.max_tokens, tainted_by=tainted_by)
        except Exception as exc:  # the helper's failure is the parent's tool result, not a crash
            log.exception("subagent_failed job=%s", job.id)
            await self.jobs.finish(job.id, "failed", f"{type(exc).__name__}: {exc}")
            raise ToolError(f"the helper failed: {type(exc).__name__}") from None
        summary = summary or "(the helper ended by asking a question; nobody could answer it)"
        await self.jobs.finish(job.id, "succeeded", summary)
        log.info("subagent_finished job=%s", job.id)
        return summary

    async def _run_background(self, job: SubagentJob, toolsets: list[Toolset], tainted_by: list[str]) -> None:
        task = asyncio.current_task()
        assert task is not None
        watch = asyncio.ensure_future(self._stop_when_cancelled_elsewhere(job.id, task))
        try:
            summary = await self._run(job, toolsets, job.task, tainted_by)
        except ToolError as exc:
            summary = f"failed: {exc}"
        except asyncio.CancelledError:
            return  # cancelled by the owner (the row says so) or by shutdown (recovered at next start)
        finally:
            watch.cancel()
            self._running.pop(job.id, None)
        ended = await self.jobs.get(job.id)
        if ended is not None and ended.state == "cancelled":
            return  # cancelled elsewhere while its last step ran: the owner asked for no report
        await self.enqueue(
            Outbound(origin=job.origin, text=f"🧩 Background job {job.id} finished:\n{summary}"), f"job:{job.id}:done")
        # The summary may carry what the helper read outside: quoted as data, and the follow-up turn counts
        # it as outside content read.
        quoted = wrap(f"background job {job.id}", summary, new_boundary())
        self.turns().resume(job.parent_session_id,
                                    f"Background job {job.id} ({job.task[:80]}) finished. Its summary (already shown "
                                    f"to the user):\n{quoted}", f"job-{job.id}-done",
                                    tainted_by=[f"background job {job.id}"])

    async def _stop_when_cancelled_elsewhere(self, job_id: str, task: asyncio.Task[Any]) -> None:
        """`subagent_cancel` in another process on this store (an `anyy chat` beside `anyy run`) can only
        mark the row: watch it, and stop the child here once it says cancelled."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            job = await self.jobs.get(job_id)
            if job is None or job.state == "cancelled":
                log.info("subagent_cancelled_elsewhere job=%s", job_id)
                task.cancel()
                return

    # -- control ----------------------------------------------------------------------------------

    async def _own(self, parent: ToolContext, job_id: str) -> SubagentJob:
        job = await self.jobs.get(job_id)
        if job is None or job.parent_session_id != parent.session_id:
            raise ToolError(f"no helper {job_id!r} was started by this conversation")
        return job

    def running_here(self) -> list[str]:
        """The ids of the background jobs whose child runs in this process."""
        return list(self._running)

    async def list(self, parent: ToolContext) -> list[SubagentJob]:
        return await self.jobs.for_parent(parent.session_id)

    async def history(self, parent: ToolContext, job_id: str) -> builtins.list[dict[str, Any]]:
        job = await self._own(parent, job_id)
        rows = await Messages(self.store).recent(job.child_session_id, 0, 200)
        return [{"role": m.role, "text": m.content[:2000],
                 **({"tool_calls": [c.name for c in m.tool_calls]} if m.tool_calls else {}),
                 **({"tool": m.tool_name} if m.tool_name else {})} for m in rows]

    async def cancel(self, parent: ToolContext, job_id: str) -> SubagentJob:
        job = await self._own(parent, job_id)
        done = await self.jobs.finish(job.id, "cancelled", "cancelled by the owner")
        if done is None:
            raise ToolError(f"helper {job_id} is not running (it is {job.state})")
        task = self._running.pop(job.id, None)
        if task is not None:
            task.cancel()
        log.info("subagent_cancelled job=%s", job.id)
        return done

    async def parent_session(self, session_id: str) -> str | None:
        """The session that started the child session `session_id` (None for other sessions)."""
        if not session_id.startswith(CHILD_PREFIX):
            return None
        job = await self.jobs.by_child_session(session_id)
        return job.parent_session_id if job else None

    async def recover(self) -> None:
        """At a resident start: jobs still marked running belonged to a process that is gone (its pid
        gone or now another process's, or this very process's predecessor); they are reported as
        interrupted, never re-run. A job whose lease lapsed counts as gone too: its owner may be another
        machine's resident, which this one cannot look up."""
        store = self.jobs.store
        for job in await self.jobs.running():
            mine = job.owner == store.owner if job.owner else job.owner_pid == os.getpid()
            alive = owner_alive(job.owner) if job.owner else _alive(job.owner_pid)
            lapsed = job.lease_until is not None and parse_iso(job.lease_until) <= store.now()
            if not mine and alive and not lapsed:
                continue  # a live `anyy chat` or another resident owns it
            done = await self.jobs.finish(job.id, "interrupted", "Anyy stopped while this ran")
            if done is not None:
                log.info("subagent_interrupted job=%s", job.id)
                await self.enqueue(Outbound(origin=job.origin, text=(
                    f"⚠️ Background job {job.id} ({job.task[:80]}) was interrupted when Anyy stopped. It was not "
                    "re-run; ask again if you still need it.")), f"job:{job.id}:interrupted")

    async def aclose(self) -> None:
        """Shutdown: stop running children; their rows stay `running` and the next start reports them."""
        for task in list(self._running.values()):
            task.cancel()
        await self._background.wait()


def _taint(parent: ToolContext) -> list[str]:
    """What the parent had read from outside: the task it writes for the child may carry it, so the child
    counts it as read (a steering write there waits for the owner, as it would in the parent)."""
    return [f"{s} (via the parent turn)" for s in parent.external_sources]


def _without(ts: Toolset, tools: set[str]) -> Toolset:
    if not any(t.name in tools for t in ts.tools):
        return ts
    return dataclasses.replace(ts, tools=[t for t in ts.tools if t.name not in tools])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
