"""The Gateway: wires the store, model, runtime, approvals, outbox, scheduler and surfaces together.

`Gateway.start()` brings everything up in one event loop; a surface that fails to start is reported
and the others keep running. With `resident=False` (an `anyy chat` while `anyy run` holds the store)
the gateway neither fires schedules nor recovers other processes' turns. Every gateway renews the leases
on the work it owns; a resident one also takes over, periodically, work whose owner has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gateway.access import Access
from gateway.approvals.policy import Policy
from gateway.approvals.service import ApprovalService
from gateway.config import Config, secret
from gateway.llm import make_client
from gateway.llm.types import ModelClient
from gateway.outbox import OutboxService
from gateway.retention import AUTOMATION_RUNS_KEPT, TRIGGER_EVENTS_KEPT, Sweep, run_sweeps, sweep_once
from gateway.services.availability import availability
from gateway.services.budget import ALLOW_ACTION
from gateway.services.factory import GatewayPorts, SurfaceStatus, build_services
from gateway.surfaces.base import Surface
from gateway.surfaces.pull_lease import PullLease
from gateway.turns.automation_runs import AutomationRuns
from gateway.turns.commands import Commands
from gateway.turns.runtime import Runtime
from gateway.turns.tool_call import ToolCaller
from gateway.turns.tool_context import TurnContext
from store import leases
from store.audit import Audit
from store.automations import Automations
from store.db import Store
from store.journal import ToolJournal
from store.records import ApprovalRecord, AutomationRecord, Inbound, Origin
from store.sessions import session_id_for
from store.triggers import TriggerEvent, TriggerEvents
from toolsets.base import Tool, Toolset
from toolsets.registry import TOOLSETS

if TYPE_CHECKING:
    from gateway.automations.triggers import TriggerSources
    from gateway.services.mcp import McpTools

log = logging.getLogger(__name__)

_DEFAULT: Any = object()
CHOICE_DEBOUNCE_S = 5.0
ASKED_LOOKBACK = 12  # rows: the question's tool call, its results, and the calls beside it in one reply

OUTCOME_TEXT = {
    "succeeded": "was approved by {by} and has run. Result: {result}",
    "failed": "was approved by {by} but failed: {result}",
    "denied": "was denied by {by}.{reason}",
    "expired": "expired without a decision; nothing was run.",
    "cancelled": "was cancelled; nothing was run.",
    "unknown": "has an unknown outcome: {result}",
}


class Gateway:
    """Implements the surfaces' `GatewayPort` (receive, press)."""

    def __init__(self, config: Config, *, surfaces: list[Surface] | None = None, model: ModelClient | None = _DEFAULT,
                 resident: bool = True, toolsets: list[Toolset] | None = None,
                 store_owner: str | None = None) -> None:
        self.config = config
        # MCP toolsets are built from the configured servers; their tools fill in once each server lists them.
        self.mcp: McpTools | None = None
        if config.mcp.enabled:
            from gateway.services import mcp  # the MCP SDK (most of a second to import) only when it is used

            self.mcp = mcp.McpTools(config.mcp.enabled)
        mcp_toolsets = list(self.mcp.toolsets.values()) if self.mcp else []
        self.toolsets = [*(TOOLSETS if toolsets is None else toolsets), *mcp_toolsets]
        self.tools: dict[str, Tool] = {}  # by name, shared with the tool caller and approvals
        self.surfaces = surfaces or []
        self.resident = resident
        self.model = self._default_model() if model is _DEFAULT else model
        self.store: Store = config.new_store(store_owner)
        self.outbox = OutboxService(self.store)
        self.services: dict[str, Any] = {}
        self.started: dict[str, str] = {}  # surface name -> "up" | "down: <why>"
        self._background: list[asyncio.Task[None]] = []
        self._pull_leases: list[PullLease] = []
        self.triggers: TriggerSources | None = None  # while resident: the mail watcher, the calendar planner
        self._stopped = False
        self._recent_choices: dict[str, float] = {}  # clarify presses, for the double-tap debounce

    def _default_model(self) -> ModelClient | None:
        cfg = self.config.model
        return make_client(cfg, secret(cfg.api_key_env)) if cfg.configured else None

    async def start(self) -> None:
        await self.store.open()
        self.access = Access(self.store, self.config, self.toolsets)
        if self.mcp is not None:  # servers that fail to start are reported and retried; Anyy starts anyway
            self.mcp.on_change = self._index_tools
            await self.mcp.start()
            self.services["mcp"] = self.mcp.manager
        self._index_tools()
        tools = self.tools
        self.approvals = ApprovalService(self.store, self.config, tools, self.outbox.enqueue, self.outbox.wake,
                                         self._context_for, self._on_outcome, self.access.may_decide)
        avail = availability(self.config)
        caller = ToolCaller(tools, Policy(self.config.tool_governance, self.config.approvals), self.approvals,
                            Audit(self.store), self.access, ToolJournal(self.store),
                            lambda service: avail.why_absent(service, self.services))
        ports = GatewayPorts(enqueue=self.outbox.enqueue, run_prompt=self.run_prompt, may_run=self.access.allowed_key,
                             turns=lambda: self.runtime, surfaces=SurfaceStatus(self.started, self.surfaces),
                             resident=self.resident)
        self.services.update(await build_services(self.config, self.store, ports))
        await self._account_notices()
        self.runtime = Runtime(self.store, self.config, self.model, self.toolsets, self.services, self.outbox, caller,
                               self.access, surfaces={s.name: s for s in self.surfaces})
        self.runtime.commands = Commands(self.runtime, self.approvals)
        self.automation_runs = AutomationRuns(self.runtime)
        if self.resident:
            # Recovery first: an inbound a surface delivers during start-up is then a new submission,
            # never a second run of one being recovered.
            await self.approvals.recover()
            await self.approvals.sweep()
            self._background.append(asyncio.create_task(self.approvals.run_sweeper(), name="approval-sweeper"))
            await self.runtime.recover()
            await self.services["subagents"].recover()
            sweeps = self._retention_sweeps()
            await sweep_once(sweeps)
            self._background.append(asyncio.create_task(run_sweeps(sweeps), name="retention"))
            scheduler = self.services.get("automations")
            if scheduler is not None:
                await scheduler.start()
                from gateway.automations.triggers import TriggerSources
                self.triggers = TriggerSources(self.store, self.services, self.outbox.enqueue, self.access)
                await self.triggers.start()
        self._background.append(asyncio.create_task(self._keep_leases(), name="leases"))
        for surface in self.surfaces:
            await self._start_surface(surface)
        self.outbox.start({s.name: s for s in self.surfaces})

    async def _account_notices(self) -> None:
        """Owners hear once when a provider signs an account out; a resident also sends what a process
        that is gone could not."""
        accounts = self.services.get("accounts")
        if accounts is None:
            return
        from gateway.accounts.notices import ExpiryNotices

        notices = ExpiryNotices(self.config, accounts, self.outbox.enqueue)
        accounts.on_expired = notices.send
        if self.resident:
            await notices.send()

    def _index_tools(self) -> None:
        """Re-index the tools by name, in place (an MCP server's tool list changed)."""
        self.tools.clear()
        self.tools.update({t.name: t for ts in self.toolsets for t in ts.tools})

    async def _start_surface(self, surface: Surface) -> None:
        # Residents sharing a store pull a platform one at a time: this one only while it holds the lease.
        lease = PullLease(self.store, surface) if self.store.shared and surface.pulls else None
        try:
            if lease is not None:
                surface.pull_on_start = False
            await surface.start(self)
            if lease is not None:
                self._pull_leases.append(lease)
                await lease.start()
            self.started[surface.name] = "up"
            log.info("surface_started surface=%s", surface.name)
        except Exception as exc:  # one broken surface must not take the others down
            self.started[surface.name] = f"down: {exc}"
            log.error("surface_failed surface=%s error=%s", surface.name, exc)

    async def stop(self) -> None:
        """Graceful shutdown: stop receiving, let running turns finish, flush the outbox. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.runtime.accepting = False
        scheduler = self.services.get("automations")
        if self.triggers is not None:
            await self.triggers.stop()
        if scheduler is not None and self.resident:
            await scheduler.shutdown()
        # Quick, whatever the backlog (a service manager kills a slow stop): queued turns do not start
        # (`accepting`), running ones get the grace, then the outbox half of it at most to flush (`anyy
        # run` exits at 1.5 times the grace and two seconds, whatever is left). What is left stays
        # recorded: pending inbounds re-run and pending rows go out at the next start.
        grace = self.config.runtime.stop_grace_s
        try:  # running turns finish, then the executions and follow-up turns they started
            await asyncio.wait_for(self._settle(), timeout=grace)
        except TimeoutError:
            log.warning("shutdown_with_turns_running grace_s=%s", grace)
            await self.runtime.cancel_turns()
        await self.outbox.stop(flush_timeout_s=grace / 2)  # flush while the surfaces can still deliver
        for lease in self._pull_leases:  # handed back first: another resident starts pulling at once
            await lease.release()
        for surface in self.surfaces:
            try:
                await surface.stop()
            except Exception:
                log.exception("surface_stop_failed surface=%s", surface.name)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for closer in (getattr(s, "aclose", None) for s in self.services.values()):
            if closer is not None:
                await closer()
        if self.model is not None:
            await self.model.aclose()
        await self.store.close()

    async def _keep_leases(self) -> None:
        """Renew this process's leases; a resident process also takes over work whose owner stopped
        (an `anyy chat` that was killed while `anyy run` kept running)."""
        renewals = 0
        while True:
            await asyncio.sleep(leases.LEASE_S / 3)
            try:
                await self.store.renew()
                await self.runtime.messages.catch_up()  # rows other processes wrote become searchable
                renewals += 1
                # Residents sharing a store look every renewal, so a killed one's turn resumes well
                # within LEASE_S + LEASE_S / 3 (docs/scale.md); alone, every third is plenty.
                if self.resident and self.runtime.accepting and (self.store.shared or renewals % 3 == 0):
                    await self.approvals.recover()
                    await self.runtime.recover()
            except Exception:
                log.exception("lease_renewal_failed")

    def _retention_sweeps(self) -> dict[str, Sweep]:
        """What this resident stops keeping (gateway.retention)."""
        sweeps: dict[str, Sweep] = {}
        artifacts = self.services.get("artifacts")
        if artifacts is not None:
            kept = timedelta(days=self.config.artifacts.retention_days)
            sweeps["artifacts"] = lambda: artifacts.sweep(kept)
        if "automations" in self.services:
            events, runs = TriggerEvents(self.store), Automations(self.store)
            sweeps["trigger_events"] = lambda: events.prune(TRIGGER_EVENTS_KEPT)
            sweeps["automation_runs"] = lambda: runs.prune_runs(AUTOMATION_RUNS_KEPT)
        return sweeps

    async def _settle(self) -> None:
        """Wait until no turn or approval execution is running (each may start the other)."""
        while True:
            await self.runtime.wait_idle()
            await self.approvals.drain()
            if self.runtime.idle and self.approvals.idle:
                return

    async def idle(self) -> None:
        """Wait until no turn, approval execution, automation delivery (clock, trigger or webhook firing)
        or deliverable message is outstanding."""
        automations = self.services.get("automations")  # there from start on
        while True:
            await self._settle()
            if automations is not None:
                await automations.runs.wait()  # its prompt turns may start approvals: settle again
            await self.outbox.wait_idle()
            if self.runtime.idle and self.approvals.idle and (automations is None or automations.runs.idle):
                return

    # -- GatewayPort ------------------------------------------------------------------------------

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        return await self.runtime.receive(inbound, dedupe_key)

    async def admits(self, surface: str, user_id: str) -> bool:
        return await self.access.is_allowed(surface, user_id)

    async def press(self, surface: str, user_id: str, action: str, value: str, origin: Origin,
                    is_group: bool = False) -> str:
        """A button press passes the same access check as a message; a clarify answer goes to the
        session that asked, and only the user who was asked may give it."""
        user_key = f"{surface}:{user_id}"
        if not await self.access.is_allowed(surface, user_id):
            log.info("press_refused surface=%s action=%s reason=no_access", surface, action)
            return "You are not allowed to use this assistant; nothing changed."
        if action in ("approve", "deny"):
            return await self.approvals.decide(value, user_key, approve=action == "approve")
        if action in ("admit", "ignore"):
            decision = await self.access.decide_pairing(surface, user_id, value, admit=action == "admit")
            await decision.deliver(self.outbox)
            return decision.answer
        if action == "clarify":
            # A double tap on a phone must not answer twice: the same choice in the same chat within a
            # few seconds is one answer. Looked up first: the first tap's answer may be in the session
            # already, and the question then no longer open.
            key = f"{user_key}|{origin.key()}|{value}"
            now = asyncio.get_running_loop().time()
            self._recent_choices = {k: t for k, t in self._recent_choices.items() if now - t < CHOICE_DEBOUNCE_S}
            asked = key in self._recent_choices or \
                await self._asked(session_id_for(origin, user_id if is_group else None), value)
            if key in self._recent_choices:  # tapped before, or while this tap was being checked
                return f"You chose: {value}"
            if not asked:
                log.info("press_refused surface=%s action=clarify reason=not_asked", surface)
                return "This question was not for you; nothing changed."
            self._recent_choices[key] = now
            await self.receive(Inbound(surface=surface, chat_id=origin.chat_id, thread_id=origin.thread_id,
                                       user_id=user_id, text=value, is_group=is_group))
            return f"You chose: {value}"
        if action == ALLOW_ACTION and "budget" in self.services:
            if await self.access.role_of(user_key) != "owner":  # a guest's press changes nothing
                log.info("press_refused surface=%s action=%s reason=not_owner", surface, action)
                return "Only an owner can raise the budget; nothing changed."
            return str(await self.services["budget"].allow_today(value, user_key))
        return "Unknown button."

    async def _asked(self, session_id: str, option: str) -> bool:
        """Whether the session's last model reply asked a clarifying question offering `option` that
        nobody has answered yet (nothing newer than that question in the session)."""
        session = await self.runtime.sessions.get(session_id)
        if session is None:
            return False
        for row in reversed(await self.runtime.messages.recent(session_id, session.epoch, ASKED_LOOKBACK)):
            if row.role == "tool":
                continue
            if row.role != "assistant":
                return False  # answered already, or something else happened since
            for call in row.tool_calls:
                if call.name == "clarify":
                    with contextlib.suppress(ValueError, AttributeError):
                        options = json.loads(call.arguments or "{}").get("options") or []
                        return option in [o.strip() for o in options if isinstance(o, str)]
            return False
        return False

    async def run_prompt(self, rec: AutomationRecord, slot: str, event: TriggerEvent | None = None) -> str:
        """A prompt automation's model turn for its scheduled `slot` (gateway/turns/automation_runs.py)."""
        return await self.automation_runs.run(rec, slot, event)

    # -- approvals plumbing -----------------------------------------------------------------------

    async def _context_for(self, rec: ApprovalRecord) -> TurnContext:
        available = self.runtime.available()
        return TurnContext(store=self.store, user_key=rec.requester, session_id=rec.session_id, origin=rec.origin,
                           tz=self.config.tz, turn_id=f"approval-{rec.id}", services=self.services,
                           enqueue=self.outbox.enqueue, available={ts.name: ts for ts in available},
                           loaded={ts.name for ts in available})

    async def _on_outcome(self, rec: ApprovalRecord, sources: list[str]) -> None:
        """The outcome as an event in the session, and one follow-up turn; `sources`, the outside content the
        execution read, make that event outside content too (the follow-up is tainted while it is in view)."""
        text = OUTCOME_TEXT.get(rec.state, rec.state).format(
            by=rec.decided_by or "the owner", result=rec.result or "",
            reason=f" Reason: {rec.reason}" if rec.reason else "")
        # A helper's held call: its parent conversation follows up (the helper's turn has ended).
        session_id = await self.services["subagents"].parent_session(rec.session_id) or rec.session_id
        self.runtime.resume(session_id, f"Approval {rec.id} for {rec.tool} {text}", f"approval-{rec.id}-{rec.state}",
                            tainted_by=sources)
