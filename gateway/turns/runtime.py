"""The turn loop: one turn at a time per session, many sessions at once.

A turn: authorize (an owner's first message gets a welcome, gateway/turns/welcome.py), route slash
commands, select toolsets, call the model, run tool calls (through policy), repeat up to `max_tool_rounds`,
and put the final text in the outbox. With `[runtime] stream` and a surface that can edit messages, the
reply is shown while the model writes it (gateway/turns/live_reply.py). Every message, call and result is
stored. Turn ids are derived from the durable inbound id, so a turn interrupted by a crash and re-run at
start-up continues its own transcript and its replies are deduplicated in the outbox.

A re-run continues where the crash left it: an answer already stored is delivered, not asked for again;
calls of the last model reply that have no result are finished first — one that never started (or a
`read` tool) runs now, one the journal shows started gets "outcome unknown" and the owner is told.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from gateway import checkpoints
from gateway.access import Access
from gateway.automations.background import Background
from gateway.config import Config
from gateway.limits import inbound_too_long
from gateway.llm.types import ChatMessage, ModelClient, ModelCutOff, ModelUnavailable, ToolSchema
from gateway.outbox import OutboxService
from gateway.selection.selector import recent_toolsets, select_toolsets, tools_for
from gateway.services.budget import budget_refusal, may_spend
from gateway.services.media import Media
from gateway.surfaces.base import Surface
from gateway.turns.compaction import Compactor
from gateway.turns.follow_up_budget import stopped_for_budget
from gateway.turns.history import to_chat
from gateway.turns.lanes import Lanes
from gateway.turns.live_reply import LiveReply, abandoned_on_error, live_reply
from gateway.turns.opening import Opening, SessionKey, open_turn
from gateway.turns.prompt import system_prompt, turn_context, with_turn_context
from gateway.turns.reply_calls import TurnCalls
from gateway.turns.session_toolsets import session_toolsets
from gateway.turns.tool_call import ToolCaller
from gateway.turns.tool_context import TurnContext
from gateway.turns.welcome import Welcome
from gateway.turns.window_cache import HistoryWindows
from gateway.turns.writes import Unwritten, turn_end, turn_step
from store.audit import Audit
from store.db import Store
from store.inbound import InboundLog
from store.messages import Messages
from store.records import AuditEvent, Inbound, MessageRecord, Origin, Outbound, SessionRecord
from store.sessions import Sessions, session_id_for
from toolsets.base import Tool, Toolset
from toolsets.loader import loader_tool
from toolsets.memory import memory_block, memory_prompt
from toolsets.skills import skills_prompt

log = logging.getLogger(__name__)

CommandHandler = Callable[[Inbound, SessionRecord], Awaitable[str | Outbound | None]]

MODEL_ERROR = "model.error"  # the audit action of a model call that failed after retries


class Runtime:
    def __init__(self, store: Store, config: Config, model: ModelClient | None, toolsets: list[Toolset],
                 services: dict[str, Any], outbox: OutboxService, caller: ToolCaller, access: Access,
                 surfaces: dict[str, Surface] | None = None) -> None:
        self.store = store
        self.config = config
        self.model = model
        self.toolsets = toolsets
        self.services = services
        self.outbox = outbox
        self.caller = caller
        self.calls = TurnCalls(caller, self.reply, self._tool_started)
        self.access = access
        # Every configured surface, started or not: a turn recovered before the surfaces start still
        # cleans up the progress sign its dead predecessor left (outbox.surfaces holds the started ones).
        self.surfaces = surfaces or {}
        self.commands: CommandHandler | None = None
        self.welcome = Welcome(store, config, access, outbox, services)
        self.sessions = Sessions(store)
        self.messages = Messages(store)
        self.windows = HistoryWindows(self.messages, config.runtime.context_budget, config.runtime.context_max_messages)
        self.compactor = Compactor(self.sessions, self.messages, self.windows, model,
                                   may_spend(services.get("budget"), access))
        self.inbound_log = InboundLog(store)
        self.media = Media(config, services.get("artifacts"), services.get("speech"))
        self._lanes = Lanes(store)
        self._turns = Background()
        self._tool_toolset = {t.name: ts.name for ts in toolsets for t in ts.tools}
        self._schemas: dict[str, tuple[Tool, ToolSchema]] = {}
        self.accepting, self._submitted = True, set[int]()  # queue ids with a turn here (never run one twice)

    # -- entry points -----------------------------------------------------------------------------

    async def receive(self, inbound: Inbound, dedupe_key: str | None = None) -> bool:
        """Record the inbound durably, then queue its turn. False for a redelivery."""
        queue_id = await self.inbound_log.accept(inbound, dedupe_key)
        if queue_id is None:
            return False
        self.submit(queue_id, inbound)
        return True

    def submit(self, queue_id: int, inbound: Inbound) -> None:
        # While shutting down, an inbound is still recorded (the surface may acknowledge it) but its
        # turn is left pending for the next start instead of racing the store closing.
        if self.accepting and queue_id not in self._submitted:
            self._submitted.add(queue_id)
            self._turns.spawn(self._handle(queue_id, inbound))

    def resume(self, session_id: str, event: str, dedupe: str, tainted_by: Sequence[str] = ()) -> None:
        """Add an event (e.g. an approval outcome) to a session and let the model follow up once.
        `tainted_by` names outside content the event carries (a helper's summary, what an approved call read)."""
        self._turns.spawn(self._follow_up(session_id, event, dedupe, list(tainted_by)))

    @property
    def idle(self) -> bool:
        return self._turns.idle

    async def wait_idle(self) -> None:
        """Wait until every queued turn has finished (tests, shutdown)."""
        await self._turns.wait()

    async def cancel_turns(self) -> None:
        """Stop the turns still running (shutdown, past its grace); their inbounds stay pending."""
        await self._turns.cancel()

    async def recover(self) -> None:
        """Re-run turns that a stopped process left unfinished (recorded, not done, lease lapsed);
        turns a live process owns are left to it."""
        for queue_id, inbound in await self.inbound_log.take_over():
            log.info("turn_recovered queue_id=%s surface=%s", queue_id, inbound.surface)
            self.submit(queue_id, inbound)

    # -- one inbound ------------------------------------------------------------------------------

    def session_id(self, inbound: Inbound) -> str:
        return session_id_for(inbound.origin, inbound.user_id if inbound.is_group else None)

    async def _handle(self, queue_id: int, inbound: Inbound) -> None:
        sid = self.session_id(inbound)
        async with self._lanes.hold(sid):
            if not self.accepting:  # shutting down: a turn that had not started stays pending for the next start
                self._submitted.discard(queue_id)
                return
            recorded = False  # the reply's transaction marked the inbound done
            try:
                recorded = await self._turn(queue_id, inbound, sid)
            except Exception:  # a bug in one turn must not kill the lane; the person hears about it
                log.exception("turn_failed session=%s", sid)
                await self.reply(inbound.origin, "Sorry — something went wrong on my side handling that message.",
                                 f"in-{queue_id}:error")
            if not recorded:
                await self.inbound_log.done(queue_id)
            self._submitted.discard(queue_id)
        if self.messages.index_due:  # the search index catches up in a batch, after the turn, not in it
            await self.messages.catch_up()

    async def _turn(self, queue_id: int, inbound: Inbound, sid: str) -> bool:
        """One inbound's turn; True when the inbound was marked done with its answer (`_answer`)."""
        turn_id = f"in-{queue_id}"
        if not await self.access.is_allowed(inbound.surface, inbound.user_id):
            pairing = await self.access.pairing_reply(inbound)
            if pairing.reply:
                await self.reply(inbound.origin, pairing.reply, f"{turn_id}:pairing")
            for owner_notice, key in pairing.notices:
                await self.outbox.enqueue(owner_notice, key)
            return False
        await self.welcome(inbound, self.available)
        too_long = inbound_too_long(inbound.text)
        commands = self.commands if inbound.text.startswith("/") else None
        # The usual turn (plain text) gets or creates its session in the trip that opens it (`model_turn`).
        session: SessionRecord | SessionKey = SessionKey(sid, inbound.origin, inbound.user_key)
        if too_long or commands is not None or inbound.attachments:
            session = record = await self.sessions.get_or_create(sid, inbound.origin, inbound.user_key)
            if too_long:  # refused whole: a cut message could mean something else than what was sent
                await self.reply(inbound.origin, too_long, f"{turn_id}:too-long")
                return False
            if commands is not None:
                said = await commands(inbound, record)
                if isinstance(said, Outbound):
                    await self.outbox.enqueue(said, f"{turn_id}:command")
                    return False
                if said is not None:
                    await self.reply(inbound.origin, said, f"{turn_id}:command")
                    return False
        if (refusal := await budget_refusal(self.services.get("budget"), self.access, inbound)) is not None:
            await self.outbox.enqueue(refusal, f"{turn_id}:budget")  # over a cap: no model call
            return False
        surface = self.surfaces.get(inbound.surface)
        progress = (surface.progress(inbound.origin, inbound.platform_message_id) if surface
                    else contextlib.nullcontext())
        live = self._live(inbound.origin, f"{turn_id}:reply")
        async with progress, abandoned_on_error(live):
            prepared = await self.media.prepare(inbound, sid, session.user_key, turn_id)
            for index, notice in enumerate(prepared.notices):
                await self.reply(inbound.origin, notice, f"{turn_id}:media:{index}")
            if prepared.empty:
                return False
            if live is not None:
                live.prefix = prepared.heard
            answer = Unwritten()
            text = await self.model_turn(session, turn_id, user_text=prepared.text, images=prepared.images,
                                         has_attachments=bool(inbound.attachments), live=live, unstored=answer)
        outbox_id = await self._answer(inbound.origin, text, f"{turn_id}:reply", live, prepared.heard, answer, queue_id)
        self._compact_after(sid, outbox_id)
        return True

    async def _follow_up(self, session_id: str, event: str, dedupe: str, tainted_by: list[str]) -> None:
        async with self._lanes.hold(session_id):
            session = await self.sessions.get(session_id)
            if session is None or await stopped_for_budget(self, session, event, dedupe, tainted_by):
                return
            live, answer = self._live(session.origin, f"{dedupe}:reply"), Unwritten()
            async with abandoned_on_error(live):
                text = await self.model_turn(session, dedupe, event=event, live=live, tainted_by=tainted_by,
                                             unstored=answer)
            outbox_id = await self._answer(session.origin, text, f"{dedupe}:reply", live, "", answer)
            self._compact_after(session_id, outbox_id)

    def _compact_after(self, session_id: str, outbox_id: int | None) -> None:
        """Summarise what left the window once a reply (if any) is delivered, off the reply's critical path."""
        if outbox_id is not None:
            self._turns.spawn(self.compactor.after_reply(session_id, self.outbox.delivered(outbox_id)))

    def _tool_started(self, origin: Origin, tool: str) -> None:
        surface = self.surfaces.get(origin.surface)
        if surface is not None:
            surface.tool_started(origin, tool)

    async def reply(self, origin: Origin, text: str, dedupe: str) -> int:
        return await self.outbox.enqueue(Outbound(origin=origin, text=text), dedupe)

    async def _answer(self, origin: Origin, text: str | None, dedupe: str, live: LiveReply | None,
                      heard: str, answer: Unwritten, queue_id: int | None = None) -> int | None:
        """Deliver a turn's final text (after `heard`, what a voice note said); returns its outbox row.
        Written with `put`, not `enqueue`: a turn re-run after a crash finds the row its first run streamed
        into, and its final text becomes an edit of that message instead of being dropped as a duplicate.
        What the turn left unwritten (`answer`) and the inbound marked done go in the transaction of the
        reply's (last) row (`turn_end`), alone if no row carries them."""
        end = turn_end(answer, queue_id) if answer or queue_id is not None else None
        self.messages.wrote(len(answer.messages))
        if live is None and text:
            return await self.outbox.put(Outbound(origin=origin, text=heard + text), dedupe, end)
        outbox_id = await live.finish(text, end) if live is not None else None
        if end is not None and (live is None or not live.carried):
            await self.store.write(end)
        return outbox_id

    def _live(self, origin: Origin, dedupe: str) -> LiveReply | None:
        return live_reply(self.outbox, origin, dedupe, self.config.runtime.stream and self.model is not None)

    # -- the model loop ---------------------------------------------------------------------------

    def available(self, exclude: Collection[str] = frozenset()) -> list[Toolset]:
        """Toolsets that exist right now: connector toolsets only when their connector is configured, and
        each without the tools whose service is missing (web_search without a search backend)."""
        present = (ts.present(self.services) for ts in self.toolsets if ts.name not in exclude)
        return [ts for ts in present if ts is not None]

    async def offered(self, user_key: str, exclude: Collection[str] = frozenset()) -> list[Toolset]:
        """The available toolsets this user's turns may use: all for an owner, the shared ones for a guest."""
        return self.access.toolsets_for(await self.access.role_of(user_key), self.available(exclude))

    async def within_session(self, session: SessionRecord, toolsets: list[Toolset]) -> list[Toolset]:
        """`toolsets` cut to what any turn of `session` may have (`session_toolsets`)."""
        return await session_toolsets(self.store, session, toolsets)

    async def model_turn(self, session: SessionRecord | SessionKey, turn_id: str, *, user_text: str | None = None,
                         event: str | None = None, has_attachments: bool = False,
                         exclude: Collection[str] = frozenset(), images: list[dict[str, Any]] | None = None,
                         only: list[Toolset] | None = None, max_rounds: int | None = None,
                         with_memory: bool = True, live: LiveReply | None = None,
                         max_tokens: int | None = None, tainted_by: Sequence[str] = (),
                         unstored: Unwritten | None = None) -> str | None:
        """Run the model on the session (a key: got or created) until it answers. Returns the final text (None
        when the turn ended by asking the user a question). With `live`, each model call streams into it.

        `only` gives the turn exactly these toolsets, all loaded (a subagent's, already limited to what
        its user may use); `with_memory=False` leaves the user's memory out of the system prompt;
        `max_tokens` stops the turn once its model calls have used that many tokens (in + out);
        `tainted_by` names outside content the turn counts as read from the start (what a subagent's
        parent had read: its task text may carry it); `unstored` receives what the turn left unwritten (its
        final message, the selection record) for the caller's reply to carry; else it is written here."""
        role = await self.access.role_of(session.user_key)
        if role is None:  # revoked since the turn was queued (a follow-up, an automation): nothing runs
            log.info("turn_refused session=%s reason=no_access", session.id)
            return None
        opened, rows = await open_turn(self.messages, self.windows, session,
                                       Opening.of(turn_id, user_text, event, images, tainted_by, with_memory))
        session = opened.session
        mine = [m for m in rows if m.turn_id == turn_id]  # a re-run after a crash: continue, don't repeat
        if mine and mine[-1].role == "assistant" and not mine[-1].tool_calls:
            return mine[-1].content  # answered before the crash: deliver that answer
        model = self.model
        if model is None:
            return (f"No model is configured yet: run `anyy setup model` (or set [model] base_url and model in "
                    f"{self.config.source}); slash commands work meanwhile: /help")
        available = await self.within_session(
            session, self.access.toolsets_for(role, self.available(exclude) if only is None else only))
        pins = session.pinned_toolsets if only is None else [ts.name for ts in available]
        selection = select_toolsets(user_text or event or "", has_attachments=has_attachments,
                                    recent=recent_toolsets(rows, turn_id, self._tool_toolset), pins=pins,
                                    available=available)
        due = unstored if unstored is not None else Unwritten()
        if (chosen := selection.model_dump()) != session.last_selection:
            due.selection = (session.id, chosen)  # goes with the turn's next write
        if opened.new is not None:
            rows.append(opened.new)
        ctx = TurnContext(store=self.store, user_key=session.user_key, session_id=session.id, origin=session.origin,
                          tz=self.config.tz, turn_id=turn_id, services=self.services, enqueue=self.outbox.enqueue,
                          available={ts.name: ts for ts in available}, loaded=set(selection.names),
                          has_buttons=self._has_buttons(session.surface), guest=role == "guest",
                          external_sources=self.windows.external_sources(session.id, rows))
        loader = loader_tool(available)
        # Interrupted calls are finished first (one may have written memory): memory is read again after.
        interrupted = bool(mine) and mine[-1].role in ("assistant", "tool")
        if interrupted:
            rows += await self.calls.finish_interrupted(ctx, session, mine, loader)
        entries = None if interrupted else opened.memory
        max_memory = self.config.runtime.memory_max_chars
        memory = "" if not with_memory else memory_block(entries, max_memory) if entries is not None else \
            await memory_prompt(self.store, session.user_key, max_memory)
        skills = await skills_prompt(self.services.get("skills"), user_text or event or "") \
            if "skills" in ctx.available else ""
        convo = [system_prompt(memory, self.config.runtime.instructions), *self.windows.view(session.id, rows)]
        convo = with_turn_context(convo, turn_context(ctx.now(), session.surface, skills))
        text = await self._converse(model, session, ctx, convo, due, available=available, loader=loader, live=live,
                                    rounds=max_rounds or self.config.runtime.max_tool_rounds, max_tokens=max_tokens)
        if unstored is None and due:  # no reply of the caller's carries what the turn left: written now
            self.messages.wrote(len(due.messages))
            await self.store.write(turn_end(due, None))
        return text

    async def _converse(self, model: ModelClient, session: SessionRecord, ctx: TurnContext,
                        convo: list[ChatMessage], due: Unwritten, *, available: list[Toolset], loader: Tool,
                        live: LiveReply | None, rounds: int, max_tokens: int | None) -> str | None:
        """`model_turn`'s calls to the model, each followed by its tool calls, until it answers; its final
        message is left in `due` (a message calling tools is written at once, with `due`'s selection)."""
        spent = 0
        for _ in range(rounds):
            if max_tokens is not None and spent >= max_tokens:
                return (f"I stopped after using {spent:,} tokens (the limit is {max_tokens:,}) without finishing. "
                        "Narrow the request, or split it.")
            tools = tools_for(sorted(ctx.loaded), available, loader)
            await checkpoints.reached("model.before_call")
            if live is not None:
                live.new_call()
            try:
                reply = await model.complete(convo, [self._schema(t) for t in tools],
                                             on_text=live.add if live is not None else None)
            except ModelUnavailable as exc:
                log.warning("model_unavailable session=%s cut=%s", session.id, live is not None and live.started)
                # Recorded for the dashboard's health page (model errors); it names the URL and cause, never a key.
                await Audit(self.store).add(AuditEvent(actor="anyy", action=MODEL_ERROR, session_id=session.id,
                                                       detail={"error": str(exc)[:300]}))
                if live is not None and live.text.strip():
                    # Part of the answer is on the screen: say plainly that it is not the whole answer.
                    note = str(exc) if isinstance(exc, ModelCutOff) else f"the reply was cut off: {exc}"
                    return f"{live.text.rstrip()}\n\n⚠️ {note}"
                return f"⚠️ {exc}"
            assistant = MessageRecord(session_id=session.id, epoch=session.epoch, turn_id=ctx.turn_id,
                                      role="assistant", content=reply.text, tool_calls=reply.tool_calls,
                                      user_key=session.user_key,
                                      meta={"usage": reply.usage.model_dump(), "model": reply.model, **reply.stored()})
            convo.append(to_chat(assistant))
            if not reply.tool_calls:
                due.messages.append(assistant)
                return reply.text
            self.messages.wrote()
            await self.store.write(turn_step(assistant, due.selection))
            due.selection = None
            spent += reply.usage.input_tokens + reply.usage.output_tokens
            for call in reply.tool_calls:
                _, visible = await self.calls.run(ctx, session, call, loader)
                convo.append(ChatMessage(role="tool", content=visible, tool_call_id=call.id, name=call.name))
            if (shown := ctx.images_shown(session.epoch)) is not None:
                await self.messages.add(shown)
                convo.append(to_chat(shown))
            if ctx.ended:
                return None
        return (f"I stopped after {rounds} rounds of tool calls without finishing. "
                "Tell me how to continue, or narrow the request.")

    def _has_buttons(self, surface_name: str) -> bool:
        return (surface := self.outbox.surfaces.get(surface_name)) is not None and surface.has_buttons

    def _schema(self, tool: Tool) -> ToolSchema:
        """A tool's schema never changes: build each provider-neutral schema object once per tool (an
        MCP server whose tool list changes brings new Tool objects)."""
        cached = self._schemas.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = self._schemas[tool.name] = (tool, ToolSchema(**tool.schema()))
        return cached[1]
