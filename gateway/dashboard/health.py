"""What the health page shows: surfaces, scheduler, outbox backlog, model errors, pending approvals,
and whatever the other services report about themselves.

The hook for services this module does not know (the MCP client, later ones): a service in
`Gateway.services` that has an ``async def health()`` returning ``(component, ok, detail)`` tuples
gets its own section, under its service name. Nothing here needs to change when one is added.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from gateway.turns.runtime import MODEL_ERROR
from store.approvals import Approvals
from store.audit import Audit
from store.automations import Automations
from store.db import Store
from store.inbound import InboundLog
from store.outbox import Backlog, Outbox
from store.records import iso, utcnow

log = logging.getLogger(__name__)


@runtime_checkable
class HealthReporter(Protocol):
    """A service that reports its own health (see the module docstring)."""

    async def health(self) -> Sequence[tuple[str, bool, str]]:
        """(component, ok, detail) lines, e.g. ("mcp:github", True, "connected, 12 tools")."""
        ...


class Line(BaseModel):
    component: str
    ok: bool
    detail: str
    last_event_at: str | None = None


class Health(BaseModel):
    surfaces: list[Line]
    scheduler: Line
    backlog: list[Backlog]
    model: Line
    model_errors_last_hour: int
    pending_approvals: int
    reported: dict[str, list[Line]]  # service name -> its own lines (MCP servers, ...)


async def health(store: Store, surfaces: Mapping[str, str], services: Mapping[str, Any], model_name: str) -> Health:
    """Collect the health page's figures from the store and the live services."""
    last = await InboundLog(store).last_by_surface()
    surface_lines = [Line(component=name, ok=state == "up", detail=state,
                          last_event_at=last.get(name)) for name, state in surfaces.items()]
    scheduler = services.get("automations")
    rows = await Automations(store).list(None)
    enabled = [r for r in rows if r.enabled and r.next_run_at]
    running = scheduler is not None and scheduler.running
    detail = f"{len(enabled)} scheduled of {len(rows)} automations" + (
        "" if running else "; not firing in this process")
    sched = Line(component="scheduler", ok=running, detail=detail,
                 last_event_at=max((r.last_run_at for r in rows if r.last_run_at), default=None))
    errors = await Audit(store).count(MODEL_ERROR, iso(utcnow() - timedelta(hours=1)))
    model = Line(component="model", ok=bool(model_name) and errors == 0,
                 detail=model_name or "no model configured ([model] base_url and model)")
    reported: dict[str, list[Line]] = {}
    for name, service in services.items():
        if isinstance(service, HealthReporter):
            try:
                reported[name] = [Line(component=c, ok=ok, detail=d) for c, ok, d in await service.health()]
            except Exception as exc:  # one broken reporter must not take the page down
                log.warning("health_report_failed service=%s error=%s", name, type(exc).__name__)
                reported[name] = [Line(component=name, ok=False, detail=f"health check failed: {exc}")]
    return Health(surfaces=surface_lines, scheduler=sched, backlog=await Outbox(store).backlog(), model=model,
                  model_errors_last_hour=errors, pending_approvals=len(await Approvals(store).list(("pending",))),
                  reported=reported)
