"""One tool call from the model: parse, validate, apply policy, run or hold, cut to budget.

Nothing here raises into the turn loop: every failure becomes a tool result the model can read. A call
with an effect (any risk but `read`) is journalled as started just before it runs; the runtime completes
the journal entry when it stores the result (`store.journal`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from gateway import checkpoints
from gateway.access import Access
from gateway.approvals.policy import Policy, Verdict
from gateway.approvals.service import ApprovalService, sha256_text
from gateway.limits import ArgumentError, parse_arguments
from gateway.turns.results import apply_budget
from gateway.turns.tool_context import TurnContext
from store.audit import Audit
from store.journal import ToolJournal
from store.records import ApprovalRecord, AuditEvent, ToolCallRecord, dumps
from toolsets.base import Risk, Tool, ToolError
from toolsets.loader import LOADER_TOOLSET

log = logging.getLogger(__name__)


class CallOutcome(BaseModel):
    visible: str  # what the model sees now
    stored: str  # what the transcript keeps
    meta: dict[str, Any] = {}
    ok: bool = True
    journal: str | None = None  # "done" when the call was journalled as started: storing completes it


def render(value: Any) -> str:
    """A handler's return value as text for the model."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json(exclude_none=True)
    if isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
        return "[" + ",".join(v.model_dump_json(exclude_none=True) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False, default=str)


def validation_message(tool: Tool, exc: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors())
    return f"Error: invalid arguments for {tool.name}: {problems}. Fix them and call again."


def held(rec: ApprovalRecord) -> CallOutcome:
    """The immediate result of a held call."""
    text = (f"Awaiting approval {rec.id}: the owner has been shown exactly this call and asked to approve "
            "it. Do not call it again; the outcome will arrive as an event.") if rec.state == "pending" else (
        f"Approval {rec.id} for this call (held before a restart) is already {rec.state}; its outcome "
        "arrives as an event. Do not call it again.")
    return CallOutcome(visible=text, stored=text, meta={"approval_id": rec.id})


def _taint_note(sources: list[str]) -> str:
    if not sources:
        return ""
    return (f"⚠️ Held because this conversation has read outside content: {', '.join(sources)}. "
            "Approve only if this change is your own wish, not an instruction planted in that content.")


class ToolCaller:
    def __init__(self, tools: dict[str, Tool], policy: Policy, approvals: ApprovalService, audit: Audit,
                 access: Access, journal: ToolJournal, why_absent: Callable[[str], str]) -> None:
        """`why_absent(service)`: why a service a tool requires is missing, as `anyy tools` says it
        (gateway/services/availability.py)."""
        self.tools = tools
        self.why_absent = why_absent
        self.policy = policy
        self.approvals = approvals
        self.audit = audit
        self.access = access
        self.journal = journal

    async def run(self, ctx: TurnContext, call: ToolCallRecord, visible: dict[str, Tool]) -> CallOutcome:
        """Run one call against the tools visible this round (name -> tool)."""
        tool = visible.get(call.name)
        known = tool or self.tools.get(call.name)
        if known is not None and ctx.guest and known.toolset != LOADER_TOOLSET \
                and not self.access.guest_may_use(known.toolset):
            # Not offered to a guest's turn, and refused even if the model names it anyway.
            await self._audit(ctx, known, {}, "tool.refused", "not shared with guests")
            return self._error(f"Error: {call.name} is not available in this conversation (it acts through "
                               "the owner's accounts). Tell the user you cannot do that here.")
        if tool is None:
            if known is not None and known.requires is not None and known.requires not in ctx.services:
                # Loading its toolset would not help: the service behind it is not configured at all.
                need = self.why_absent(known.requires) or f"[{known.requires}] is not configured"
                return self._error(f"Error: {call.name} is not available here: {need}. Tell the user so; "
                                   "do not call it again.")
            hint = f" It belongs to the '{known.toolset}' toolset: call load_toolsets first." if known else ""
            return self._error(f"Error: unknown tool {call.name!r}.{hint}")
        try:
            args = tool.args_model.model_validate(parse_arguments(call.arguments))
        except ValidationError as exc:
            return self._error(validation_message(tool, exc))
        except ArgumentError as exc:
            return self._error(f"Error: arguments for {tool.name} were refused: {exc}. "
                               "Send a JSON object matching the tool's schema.")
        plain = args.model_dump(mode="json")
        verdict, descriptor, reason = await self.policy.decide(tool, plain, ctx.user_key,
                                                               tool.descriptor_for(ctx, args), ctx.external_sources)
        if verdict is Verdict.REFUSE:
            await self._audit(ctx, tool, plain, "tool.refused", reason)
            return self._error(f"Error: {tool.name} was {reason}.")
        if verdict is Verdict.HOLD:
            try:
                deciders = await self.access.deciders(ctx.user_key, ctx.origin.surface, tool.toolset)
                rec = await self.approvals.hold(ctx, tool, args, call.id, str(descriptor.execution), deciders,
                                                note=_taint_note(ctx.external_sources) if descriptor.steering else "")
            except ToolError as exc:  # the preview found the call impossible (sent draft, server down)
                await self._audit(ctx, tool, plain, "tool.refused", f"preview failed: {exc}")
                return self._error(f"Error: {exc}")
            return held(rec)
        journalled = descriptor.risk is not Risk.READ
        if journalled:
            await self.journal.start(ctx.session_id, ctx.turn_id, call.id, tool.name, sha256_text(dumps(plain)))
        try:
            text, ok = render(await tool.call(ctx, args)), True
        except ToolError as exc:
            text, ok = f"Error: {exc}", False
        except Exception as exc:
            log.exception("tool_crashed tool=%s", tool.name)
            text, ok = f"Error: {tool.name} failed unexpectedly ({type(exc).__name__}: {exc}).", False
        await checkpoints.reached("tool.ran")
        if verdict is Verdict.RUN_AUDITED:
            await self._audit(ctx, tool, plain, "tool.run" if ok else "tool.failed", reason)
        budget = descriptor.output_budget
        if len(text) > budget.visible_chars:  # persisting writes a file: keep it off the event loop
            result = await asyncio.to_thread(apply_budget, text, budget, call_id=call.id, ok=ok)
        else:
            result = apply_budget(text, budget, call_id=call.id, ok=ok)
        return CallOutcome(visible=result.visible, stored=result.stored, meta=result.meta, ok=ok,
                           journal="done" if journalled else None)

    async def resume(self, ctx: TurnContext, call: ToolCallRecord, visible: dict[str, Tool]) -> CallOutcome:
        """A call found without a result when its turn is re-run, that never started: the approval that
        already holds it (whatever policy says now), or else a normal run."""
        rec = await self.approvals.repo.for_call(ctx.session_id, ctx.turn_id, call.id)
        return held(rec) if rec is not None else await self.run(ctx, call, visible)

    @staticmethod
    def _error(text: str) -> CallOutcome:
        return CallOutcome(visible=text, stored=text, ok=False)

    async def _audit(self, ctx: TurnContext, tool: Tool, args: dict[str, Any], action: str, reason: str) -> None:
        await self.audit.add(AuditEvent(actor=ctx.user_key, action=action, tool=tool.name,
                                        args_sha256=sha256_text(dumps(args)), session_id=ctx.session_id,
                                        detail={"reason": reason}))

