"""`/status`: what this conversation runs on right now, and whether a write that steers the model
(memory, automations, skills) would be held for approval — naming the outside content still in view
that holds it."""

from __future__ import annotations

from gateway.turns.history import external_sources
from gateway.turns.runtime import Runtime
from store.approvals import Approvals
from store.records import Inbound, SessionRecord

_SHOWN_SOURCES = 8


async def status_report(runtime: Runtime, inbound: Inbound, session: SessionRecord) -> str:
    """The `/status` text for `session`, as seen by the user who asked."""
    cfg = runtime.config
    model = (f"{cfg.model.model} ({cfg.model.provider}{', sees images' if cfg.model.vision else ''})"
             if runtime.model is not None else "not configured")
    pins = session.pinned_toolsets
    toolsets = f"pinned: {', '.join(pins)}" if pins else "chosen for each message"
    last = (session.last_selection or {}).get("names") or []
    if last and not pins:
        toolsets += f" (last: {', '.join(last)})"
    pending = [a for a in await Approvals(runtime.store).list(("pending",)) if inbound.user_key in a.deciders]
    waiting = (f"{len(pending)} waiting for you: " + ", ".join(f"{a.id} ({a.tool})" for a in pending[:10])
               if pending else "none waiting for you")
    rows = await runtime.windows.load(session.id, session.epoch)
    sources = external_sources(rows, runtime.windows.summary(session.id))
    if sources:
        shown = ", ".join(sources[:_SHOWN_SOURCES]) + (f" and {len(sources) - _SHOWN_SOURCES} more"
                                                       if len(sources) > _SHOWN_SOURCES else "")
        steering = (f"held for your approval: this conversation still has outside content in view ({shown}). "
                    "/new starts a fresh one.")
    else:
        steering = "run at once: no outside content is in view"
    return "\n".join([f"Model: {model}", f"Time zone: {cfg.runtime.timezone}", f"Toolsets: {toolsets}",
                      f"Approvals: {waiting}", f"Memory and automation writes: {steering}"])
