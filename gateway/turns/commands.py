"""Slash commands: they work without a model, on every surface."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from connectors.mcp_names import toolset_name
from gateway.approvals.policy import effective_descriptor
from gateway.approvals.service import ApprovalService
from gateway.automations.reminders import cancel_command, remind_command, reminders_command
from gateway.automations.scheduler import AutomationService
from gateway.selection.selector import Selection, describe_selection, describe_tools, select_toolsets, tools_for
from gateway.services.usage import usage_report
from gateway.turns.runtime import Runtime
from gateway.turns.status import status_report
from store.approvals import Approvals
from store.records import Inbound, Outbound, SessionRecord
from store.tasks import Tasks
from toolsets.base import Toolset
from toolsets.briefing import configured_parts, set_briefing
from toolsets.loader import loader_tool
from toolsets.schedule import AutomationError

HELP = """Anyy — your assistant. Just write; or use:
/new — start a fresh conversation (history stays searchable)
/compact — summarise the older part of this conversation now
/tools — the tools visible to the model now
/toolsets — what the last turn selected and why; /toolsets pin NAME… or /toolsets auto
/remind <when> <text> — e.g. /remind 10m stretch, /remind friday 9:30 review, /remind 明天9点 开会
/reminders — your reminders; /cancel <id> to delete one
/briefing 7:30 — a morning briefing every day at that time (events, important mail, due tasks); /briefing off
/tasks — your open tasks
/approvals — actions waiting for your approval; /approvals ID shows one in full; /approve ID, /deny ID [reason]
/usage — tokens used (today, this conversation, 30 days) and their cost
/status — model, time zone, toolsets, approvals, and whether a memory write would be held now (and why)"""


def nearest_command(name: str, known: Iterable[str]) -> str | None:
    """The known command within edit distance 2 of `name` (a word of letters), closest first; None when
    there is none, or when `name` is so short that 2 edits would make anything of it ("/no")."""
    if not name.isalpha() or not name.isascii():
        return None
    best = min(((edit_distance(name, k), k) for k in known), default=(3, ""))
    distance, command = best
    return command if distance <= 2 and distance < len(name) else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, with a swap of two neighbours counting as one edit ("taks" → "task")."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


Handler = Callable[[Inbound, SessionRecord, str], Awaitable[str | Outbound]]

if TYPE_CHECKING:  # the MCP SDK is imported only where a server is configured
    from connectors.mcp import McpManager


def status_lines(manager: McpManager | None) -> list[tuple[str, str]]:
    """(toolset name, line) per server, for `/tools`: its state and tool count, or why it is down."""
    if manager is None:
        return []
    return [(ts, f"{ts}: {server.status()}") for ts, server in
            ((toolset_name(name), server) for name, server in manager.servers.items())]


class Commands:
    """Routes `/name args` to a handler; returns None for text that is not a known command."""

    def __init__(self, runtime: Runtime, approvals: ApprovalService) -> None:
        self.runtime = runtime
        self.approvals = approvals
        self.table: dict[str, Handler] = {
            "start": self.start, "help": self.help, "new": self.new, "tools": self.tools,
            "toolsets": self.toolsets, "approvals": self.list_approvals, "approve": self.approve,
            "deny": self.deny, "tasks": self.tasks, "remind": self.remind, "reminders": self.reminders,
            "cancel": self.cancel, "briefing": self.briefing, "usage": self.usage, "compact": self.compact,
            "status": self.status,
        }

    async def __call__(self, inbound: Inbound, session: SessionRecord) -> str | Outbound | None:
        head, _, args = inbound.text.strip().partition(" ")
        name = head[1:].split("@", 1)[0].lower()  # Telegram appends @botname in groups
        handler = self.table.get(name)
        if handler is None:
            # "/aprove x" is a typo: answering it costs nothing, sending it to the model costs a call.
            # "/etc/hosts is wrong" is a message, not a command: the model reads it.
            near = nearest_command(name, self.table)
            return f"There is no /{name}. Did you mean /{near}? (/help lists the commands.)" if near else None
        return await handler(inbound, session, args.strip())

    async def start(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return "Hi! I'm Anyy, your assistant. " + HELP.split("\n", 1)[1]

    async def help(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return HELP

    async def new(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        await self.runtime.sessions.new_epoch(session.id)
        return "Started a fresh conversation. Earlier messages stay searchable."

    async def compact(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        if self.runtime.model is None:
            return "No model is configured, so there is nothing to summarise with."
        if not await self.runtime.compactor.may_spend(session.user_key):
            return "💰 The budget is used up, so I am not calling the model to summarise (/usage shows it)."
        count = await self.runtime.compactor.compact(session, force=True)
        if not count:
            return "Nothing to compact yet: the conversation is short."
        return f"Summarised {count} earlier messages; the conversation continues from the summary."

    def _selection(self, session: SessionRecord, available: list[Toolset]) -> Selection:
        if session.last_selection:
            return Selection.model_validate(session.last_selection)
        return select_toolsets("", has_attachments=False, recent=[], pins=session.pinned_toolsets,
                               available=available)

    async def tools(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        available = await self.runtime.offered(inbound.user_key)
        tools = tools_for(self._selection(session, available).names, available, loader_tool(available))
        governance = self.runtime.config.tool_governance
        listing = describe_tools(tools, lambda t: effective_descriptor(t, governance))
        offered = {ts.name for ts in available}  # a guest hears only of the servers offered to them
        servers = [line for name, line in status_lines(self.runtime.services.get("mcp")) if name in offered]
        return "\n".join([listing, "MCP servers:", *(f"• {line}" for line in servers)]) if servers else listing

    async def toolsets(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        words = args.split()
        offered = await self.runtime.offered(inbound.user_key)
        available = {ts.name for ts in offered}
        if words[:1] == ["auto"]:
            await self.runtime.sessions.update(session.id, pinned_toolsets=None)
            return "Toolsets are chosen automatically again for each message."
        if words[:1] == ["pin"]:
            names = words[1:]
            unknown = [n for n in names if n not in available]
            if not names or unknown:
                return (f"Unknown toolsets: {', '.join(unknown)}. " if unknown else "Name at least one toolset. ") + \
                    f"Available: {', '.join(sorted(available))}"
            await self.runtime.sessions.update(session.id, pinned_toolsets=names)
            return f"Pinned: {', '.join(names)} (plus the loader). /toolsets auto to undo."
        return describe_selection(self._selection(session, offered), offered)

    async def list_approvals(self, inbound: Inbound, session: SessionRecord, args: str) -> str | Outbound:
        if args:
            return await self.show_approval(inbound, args.split()[0])
        pending = [a for a in await Approvals(self.runtime.store).list(("pending",))
                   if inbound.user_key in a.deciders]
        if not pending:
            return "Nothing is waiting for your approval."
        return "\n".join(f"{a.id} — {a.tool}: {a.preview.splitlines()[0][:80] if a.preview else ''}" for a in pending)

    async def show_approval(self, inbound: Inbound, approval_id: str) -> str | Outbound:
        """`/approvals ID`: the whole preview, verbatim (a prompt cuts a long one)."""
        rec = await Approvals(self.runtime.store).get(approval_id)
        if rec is None or inbound.user_key not in (*rec.deciders, rec.requester):
            return f"No approval {approval_id}."  # someone else's looks exactly like a missing one
        return Outbound(origin=inbound.origin, preformatted=True,
                        text=f"Approval {rec.id} ({rec.state}): {rec.tool}\n\n{rec.preview}")

    async def approve(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        if not args:
            return "Usage: /approve ID"
        return await self.approvals.decide(args.split()[0], inbound.user_key, approve=True)

    async def deny(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        approval_id, _, reason = args.partition(" ")
        if not approval_id:
            return "Usage: /deny ID [reason]"
        return await self.approvals.decide(approval_id, inbound.user_key, approve=False, reason=reason.strip() or None)

    async def tasks(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        open_tasks = await Tasks(self.runtime.store).list(inbound.user_key)
        if not open_tasks:
            return "No open tasks."
        return "\n".join(f"#{t.id} {t.title}" + (f" (due {t.due})" if t.due else "") for t in open_tasks)

    async def remind(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return await remind_command(self._automations(), inbound.user_key, inbound.origin, args)

    async def reminders(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return await reminders_command(self._automations(), inbound.user_key)

    async def cancel(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return await cancel_command(self._automations(), inbound.user_key, args)

    async def briefing(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        configured = configured_parts([n for n in ("calendar", "email") if self.runtime.services.get(n)])
        try:
            return await set_briefing(self._automations(), inbound.user_key, session.origin, args, configured)
        except AutomationError as exc:
            return str(exc)

    async def usage(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        report = await usage_report(self.runtime.store, self.runtime.config, inbound.user_key, session.id)
        budget = self.runtime.services.get("budget")
        caps = await budget.report() if budget is not None else []
        return "\n".join([report, *caps])

    async def status(self, inbound: Inbound, session: SessionRecord, args: str) -> str:
        return await status_report(self.runtime, inbound, session)

    def _automations(self) -> AutomationService:
        return self.runtime.services["automations"]  # always registered (gateway.services.factory)
