"""Durable approvals: hold a call, post a prompt, decide once, execute the stored call at most once.

An approval is a row, not a coroutine: every step is an atomic state transition in the store, so a
restart, a double tap or a replayed callback can never run a call twice. There is one approval per tool
call, written together with its prompt; it stores the exact effect payload its preview showed, and an
approved call runs the tool's effect function with that payload. See docs/approvals.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import string
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from gateway import checkpoints
from gateway.automations.background import Background
from gateway.config import Config
from store.approvals import Approvals
from store.db import Store
from store.leases import lease_until
from store.records import ApprovalRecord, Button, Outbound, dumps, iso, parse_iso, utcnow
from toolsets.base import Preview, Tool, ToolContext, ToolError

log = logging.getLogger(__name__)

Enqueue = Callable[[Outbound, str | None], Awaitable[int]]
Wake = Callable[[str], None]
MayDecide = Callable[[ApprovalRecord, str, str], Awaitable[bool]]  # (approval, actor, toolset) -> allowed
ContextFor = Callable[[ApprovalRecord], Awaitable[ToolContext]]
# (approval, the outside sources its execution read): the outcome event carries them (it taints, see `_run`)
OnOutcome = Callable[[ApprovalRecord, list[str]], Awaitable[None]]

PROMPT_PREVIEW_CHARS = 2500  # fits one Telegram message and one Slack block with the header and footer

_DONE_MARK = {"succeeded": "✅ Approved — done", "failed": "❌ Approved — failed", "denied": "🚫 Denied",
              "expired": "⌛ Expired", "cancelled": "Cancelled", "unknown": "⚠️ Outcome unknown"}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def binding_hash(preview: Preview) -> str | None:
    return None if preview.binding is None else sha256_text(dumps(preview.binding))


_ID_ALPHABET = string.ascii_letters + string.digits


def new_approval_id() -> str:
    """Unguessable and short: 16 letters and digits (95 bits), well inside Telegram's 64-byte callbacks.
    No '-' or '_': an id starting with '-' would read as an option in `anyy approvals approve ID`."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(16))


def shown_preview(rec: ApprovalRecord) -> str:
    """The preview as a prompt shows it: cut with a clear note when too long (`/approvals ID` shows all)."""
    if len(rec.preview) <= PROMPT_PREVIEW_CHARS:
        return rec.preview
    return (f"{rec.preview[:PROMPT_PREVIEW_CHARS]}\n[… preview cut: {len(rec.preview)} characters in all. "
            f"Send /approvals {rec.id} to read the whole text before deciding.]")


class ApprovalService:
    def __init__(self, store: Store, config: Config, tools: dict[str, Tool], enqueue: Enqueue, wake: Wake,
                 context_for: ContextFor, on_outcome: OnOutcome, may_decide: MayDecide) -> None:
        self.repo = Approvals(store)
        self.may_decide = may_decide
        self.config = config
        self.tools = tools
        self.enqueue = enqueue
        self.wake = wake  # the outbox dispatcher of a surface, after a prompt row was written here
        self.context_for = context_for
        self.on_outcome = on_outcome
        self._running = Background()  # executions started by decisions and by recovery

    # -- holding a call ---------------------------------------------------------------------------

    async def hold(self, ctx: ToolContext, tool: Tool, args: BaseModel, tool_call_id: str, execution: str,
                   deciders: list[str], note: str = "") -> ApprovalRecord:
        """Record the exact call, its effect payload and its prompt (one transaction), the prompt going to
        `deciders` (from `Access.deciders`; the requester is one only when access says so). `note` goes
        above the preview (why this call is held). Returns the approval; a call held before (the same turn
        re-run after a crash) gets its existing approval, and nothing is written."""
        existing = await self.repo.for_call(ctx.session_id, ctx.turn_id, tool_call_id)
        if existing is None:
            preview = await self._preview(ctx, tool, args)
            text = f"{note}\n\n{preview.text}" if note else preview.text
            args_json = dumps(args.model_dump(mode="json"))
            payload_json = None if preview.payload is None else dumps(preview.payload)
            now = utcnow()
            ttl = self.config.approvals.ttl_hours.get(tool.name, self.config.approvals.default_ttl_hours)
            rec = ApprovalRecord(
                id=new_approval_id(), session_id=ctx.session_id, origin=ctx.origin, requester=ctx.user_key,
                deciders=sorted(set(deciders)), tool=tool.name, tool_call_id=tool_call_id,
                turn_id=ctx.turn_id, args_json=args_json, args_sha256=sha256_text(args_json),
                binding_sha256=binding_hash(preview), payload_json=payload_json,
                payload_sha256=None if payload_json is None else sha256_text(payload_json),
                execution=execution, preview=text, state="pending", created_at=iso(now),
                expires_at=iso(now + timedelta(hours=ttl)),
            )
            existing, created = await self.repo.create(rec, self._prompt(rec))
            if created:
                self.wake(rec.origin.surface)
                log.info("approval_pending id=%s tool=%s session=%s", rec.id, rec.tool, rec.session_id)
        else:
            log.info("approval_found id=%s state=%s session=%s", existing.id, existing.state, existing.session_id)
        await checkpoints.reached("approval.held")
        return existing

    async def _preview(self, ctx: ToolContext, tool: Tool, args: BaseModel) -> Preview:
        if tool.previewer is not None:
            return await tool.previewer(ctx, args)
        lines = [f"{k}: {v}" for k, v in args.model_dump(mode="json").items()]
        return Preview(text="\n".join(lines) or "(no arguments)")

    def _prompt(self, rec: ApprovalRecord) -> Outbound:
        expires = parse_iso(rec.expires_at).astimezone(self.config.tz).strftime("%Y-%m-%d %H:%M %Z")
        asked_by = f"Asked by helper job {rec.session_id.removeprefix('subagent:')}.\n" \
            if rec.session_id.startswith("subagent:") else ""
        text = (f"🔐 Approval needed: {rec.tool}\n{asked_by}\n{shown_preview(rec)}\n\n"
                f"Expires {expires}. Reply /approve {rec.id} or /deny {rec.id} [reason].")
        return Outbound(origin=rec.origin, text=text, preformatted=True, buttons=[
            Button(label="Approve", action="approve", value=rec.id),
            Button(label="Deny", action="deny", value=rec.id)])

    # -- deciding ---------------------------------------------------------------------------------

    async def decide(self, approval_id: str, actor: str, approve: bool, reason: str | None = None, *,
                     owner: bool = False) -> str:
        """Approve or deny on behalf of `actor` (a user key; `owner=True` for the admin CLI, which is
        run by whoever owns the data directory). Returns a short answer for the presser. Approval only
        starts the execution; its outcome arrives as its own message."""
        rec = await self.repo.get(approval_id)
        if rec is None:
            return f"No approval {approval_id}."
        tool = self.tools.get(rec.tool)
        if not owner and not await self.may_decide(rec, actor, tool.toolset if tool else ""):
            log.info("approval_refused_actor id=%s", approval_id)
            return "You are not allowed to decide this approval."
        if rec.state != "pending":
            return f"Already {rec.state}; nothing changed."
        if parse_iso(rec.expires_at) <= utcnow():
            await self.expire(approval_id)
            return "This approval has expired; nothing was run."
        fields = {"decided_by": actor, "decided_at": iso(utcnow()), "reason": reason}
        if not approve:
            done = await self.repo.transition(approval_id, ("pending",), "denied", actor, **fields)
            if done is None:
                return "Already decided; nothing changed."
            await self._finish(done)
            return "Denied."
        done = await self.repo.transition(approval_id, ("pending",), "approved", actor, **fields)
        if done is None:
            return "Already decided; nothing changed."
        self._running.spawn(self.execute(approval_id))
        return "Approved; running it now."

    @property
    def idle(self) -> bool:
        return self._running.idle

    async def drain(self) -> None:
        """Wait for executions started by decisions (used at shutdown and by tests)."""
        await self._running.wait()

    # -- executing --------------------------------------------------------------------------------

    async def execute(self, approval_id: str) -> None:
        """Run the stored call once. The `approved -> executing` transition is the claim: whoever
        wins it runs the call; everyone else finds it taken."""
        store = self.repo.store
        rec = await self.repo.transition(approval_id, ("approved",), "executing", "anyy", owner=store.owner,
                                         lease_until=lease_until(store.now()))
        if rec is None:
            return
        await checkpoints.reached("approval.claimed")
        sources: list[str] = []
        state, result = await self._run(rec, sources)
        await checkpoints.reached("approval.ran")
        done = await self.repo.transition(approval_id, ("executing",), state, "anyy", result=result)
        log.info("approval_executed id=%s tool=%s state=%s", approval_id, rec.tool, state)
        if done is not None:
            await self._finish(done, sources)

    async def _run(self, rec: ApprovalRecord, sources: list[str]) -> tuple[Literal["succeeded", "failed"], str]:
        """Run the stored call; the outside sources it read (an MCP answer, a server's refusal: whatever
        the tool put in an untrusted block, in its result or its error) are left in `sources`, since the
        outcome event that carries the result to the model is outside content like any other read."""
        tool = self.tools.get(rec.tool)
        if tool is None:
            return "failed", f"the tool {rec.tool} no longer exists"
        if sha256_text(rec.args_json) != rec.args_sha256:
            return "failed", "refused: the stored call does not match what was shown (hash mismatch)"
        if rec.payload_json is not None and sha256_text(rec.payload_json) != rec.payload_sha256:
            return "failed", "refused: the stored effect does not match what was shown (hash mismatch)"
        try:
            args = tool.args_model.model_validate_json(rec.args_json)
            ctx = await self.context_for(rec)
            try:
                value = await self._call(ctx, tool, args, rec)
            finally:
                sources += ctx.external_sources
        except (ToolError, ValidationError) as exc:
            return "failed", str(exc)
        except Exception as exc:  # the outcome is known (it raised); report it, never retry
            log.exception("approval_tool_crashed id=%s tool=%s", rec.id, rec.tool)
            return "failed", f"{type(exc).__name__}: {exc}"
        return "succeeded", value if isinstance(value, str) else dumps(
            value.model_dump(mode="json") if isinstance(value, BaseModel) else value)

    async def _call(self, ctx: ToolContext, tool: Tool, args: BaseModel, rec: ApprovalRecord) -> Any:
        """The stored call's tool run. Raises ToolError when its bound preview has changed since."""
        if tool.effector is not None and rec.payload_json is not None:
            # Exactly what the owner saw: the effect claims its target on this payload, no fresh read.
            return await tool.effector(ctx, args, json.loads(rec.payload_json))
        if rec.binding_sha256 is not None:
            now_preview = await self._preview(ctx, tool, args)
            if binding_hash(now_preview) != rec.binding_sha256:
                raise ToolError("refused: what this approval showed has changed since (edited, or changed on the "
                                "server); ask again for a new approval")
        return await tool.call(ctx, args)

    # -- endings ----------------------------------------------------------------------------------

    async def _finish(self, rec: ApprovalRecord, sources: list[str] | None = None) -> None:
        """Edit the prompt to show the outcome, then let the session continue (`sources`: the outside
        content its execution read)."""
        mark = _DONE_MARK.get(rec.state, rec.state)
        by = f" by {rec.decided_by}" if rec.decided_by and rec.state in ("denied", "succeeded", "failed") else ""
        detail = f"\n{rec.result}" if rec.result and rec.state in ("failed", "unknown") else ""
        if rec.reason and rec.state in ("denied", "cancelled"):
            detail = f"\nReason: {rec.reason}"
        text = f"{mark}{by}: {rec.tool}\n\n{shown_preview(rec)}{detail}"
        for ref in rec.prompt_refs:
            await self.enqueue(Outbound(origin=rec.origin, text=text, edit_of_outbox_id=ref, preformatted=True),
                               f"approval:{rec.id}:edit:{rec.state}:{ref}")
        await self.on_outcome(rec, sources or [])

    async def expire(self, approval_id: str) -> None:
        done = await self.repo.transition(approval_id, ("pending",), "expired", "anyy")
        if done is not None:
            await self._finish(done)

    async def cancel_requested_by(self, user_key: str, reason: str) -> int:
        """Cancel every pending approval `user_key` requested (their access was revoked); each prompt is
        edited to say so. Returns how many were cancelled."""
        count = 0
        for rec in await self.repo.list(("pending",), requester=user_key, limit=10_000):
            done = await self.repo.transition(rec.id, ("pending",), "cancelled", "anyy", reason=reason)
            if done is not None:
                await self._finish(done)
                count += 1
        return count

    async def sweep(self) -> int:
        """Expire every pending approval past its time. Returns how many expired."""
        ids = await self.repo.due_to_expire()
        for approval_id in ids:
            await self.expire(approval_id)
        return len(ids)

    async def recover(self) -> None:
        """At start-up and then periodically: a call found `executing` whose executor has stopped
        (lease expired, or the process is gone) crashed mid-flight and its outcome is unknown — tell the
        owner and never retry it. One a live process is executing is left alone. A call found `approved`
        never started, so it runs now (the claim decides who runs it)."""
        for approval_id in await self.repo.stranded():
            done = await self.repo.transition(
                approval_id, ("executing",), "unknown", "anyy",
                result="the gateway stopped while this was running; check whether it happened before retrying")
            if done is not None:
                await self.enqueue(Outbound(origin=done.origin, text=(
                    f"⚠️ {done.tool} (approval {done.id}) was running when Anyy stopped. Its outcome is "
                    "unknown and it will not be retried automatically; please check, then ask again if needed.")),
                    f"approval:{done.id}:unknown-notice")
                await self._finish(done)
        for approval_id in await self.repo.ids_in_state("approved"):
            self._running.spawn(self.execute(approval_id))

    async def run_sweeper(self, every_s: float = 60.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.sweep()
            except Exception:
                log.exception("approval_sweep_failed")

