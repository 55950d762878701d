"""One model reply's tool calls, run and stored: each result row is written with its journal entry, and
the calls a stopped process left without a result are finished on the re-run (never run twice)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.turns.history import UNKNOWN_OUTCOME
from gateway.turns.tool_call import ToolCaller
from gateway.turns.tool_context import TurnContext
from store.records import MessageRecord, Origin, SessionRecord, ToolCallRecord
from toolsets.base import Tool

log = logging.getLogger(__name__)

Notify = Callable[[Origin, str, str], Awaitable[int]]
ToolStarted = Callable[[Origin, str], None]


class TurnCalls:
    """Runs a turn's tool calls through the `ToolCaller` and stores their results; `notify(origin, text,
    dedupe)` tells the owner about a call whose outcome is unknown."""

    def __init__(self, caller: ToolCaller, notify: Notify, tool_started: ToolStarted | None = None) -> None:
        self.caller = caller
        self.notify = notify
        self.tool_started = tool_started  # tells the surface a tool is running (a terminal's progress line)

    async def run(self, ctx: TurnContext, session: SessionRecord, call: ToolCallRecord,
                  loader: Tool, *, resumed: bool = False) -> tuple[MessageRecord, str]:
        """Run one call (`resumed`: one left without a result by a stopped process, never started) and
        store its result, completing its journal entry in the same transaction. Returns the stored row
        and what the model sees now."""
        # Recomputed per call: a load_toolsets earlier in the same reply makes its tools callable.
        visible = {t.name: t for name in ctx.loaded for t in ctx.available[name].tools}
        visible[loader.name] = loader
        run = self.caller.resume if resumed else self.caller.run
        if self.tool_started is not None:
            self.tool_started(ctx.origin, call.name)
        outcome = await run(ctx, call, visible)
        # The row remembers what outside content the turn had read by now, so every later turn that
        # still sees this row (and a re-run after a crash) holds steering writes: history.external_sources.
        meta = {**outcome.meta, "external": list(ctx.external_sources)} if ctx.external_sources else outcome.meta
        result = MessageRecord(session_id=session.id, epoch=session.epoch, turn_id=ctx.turn_id, role="tool",
                               content=outcome.stored, tool_call_id=call.id, tool_name=call.name,
                               user_key=session.user_key, meta=meta)
        result.id = await self.caller.journal.add_result(result, outcome.journal)
        return result, outcome.visible

    async def finish_interrupted(self, ctx: TurnContext, session: SessionRecord, mine: list[MessageRecord],
                                 loader: Tool) -> list[MessageRecord]:
        """The calls of this turn's last model reply that have no result (the process stopped among
        them): run those that never started; those the journal shows started get "outcome unknown",
        never a second run, and the owner hears of each. Returns the result rows, in call order."""
        last = next((m for m in reversed(mine) if m.role == "assistant"), None)
        answered = {m.tool_call_id for m in mine if m.role == "tool"}
        calls = [c for c in (last.tool_calls if last else []) if c.id not in answered]
        if not calls:
            return []
        started = await self.caller.journal.interrupted(session.id, ctx.turn_id)
        out = []
        for call in calls:
            if call.id not in started:
                out.append((await self.run(ctx, session, call, loader, resumed=True))[0])
                continue
            log.warning("tool_outcome_unknown session=%s tool=%s call=%s", session.id, call.name, call.id)
            row = MessageRecord(session_id=session.id, epoch=session.epoch, turn_id=ctx.turn_id, role="tool",
                                content=UNKNOWN_OUTCOME, tool_call_id=call.id, tool_name=call.name,
                                user_key=session.user_key, meta={"outcome": "unknown"})
            row.id = await self.caller.journal.add_result(row, "unknown")
            await self.notify(session.origin, f"⚠️ {call.name} was running when Anyy stopped. Its outcome is "
                              "unknown and it was not run again; please check whether it happened.",
                              f"{ctx.turn_id}:unknown:{call.id}")
            out.append(row)
        return out
