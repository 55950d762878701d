"""The dashboard's pages (GET): each reads through the store repositories and the live services, then
renders its template. Nothing here changes state; the buttons post to `actions`."""

from __future__ import annotations

from datetime import datetime, timedelta

from aiohttp import web

from gateway.dashboard.auth import PREFIX
from gateway.dashboard.catalog import catalog, selections
from gateway.dashboard.context import gateway_of, render
from gateway.dashboard.health import health
from gateway.services.availability import availability
from store.approvals import Approvals
from store.audit import Audit
from store.messages import Messages
from store.records import iso
from store.sessions import Sessions
from toolsets.registry import TOOLSETS
from toolsets.schedule import describe, parse_schedule

PENDING = ("pending",)
DECIDED = ("approved", "executing", "succeeded", "failed", "denied", "expired", "cancelled", "unknown")
AUDIT_LIMIT = 500
SEARCH_LIMIT = 50


async def tools(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    rows = catalog(TOOLSETS, gw.toolsets, availability(gw.config), set(gw.services), gw.config.tool_governance,
                   gw.access.guest_may_use)
    return render(request, "tools.html", toolsets=rows)


async def toolsets(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    available = gw.runtime.available()
    rows = selections(await Sessions(gw.store).recent(50), available)
    return render(request, "toolsets.html", selections=rows, available=[ts.name for ts in available])


async def approvals(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    repo = Approvals(gw.store)
    return render(request, "approvals.html", pending=await repo.list(PENDING),
                  decided=await repo.list(DECIDED, limit=50))


async def automations(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    service = gw.services["automations"]
    rows = []
    for rec in await service.list_all():
        rows.append({"rec": rec, "schedule": describe(parse_schedule(rec.schedule), gw.config.tz),
                     "runs": await service.repo.history(rec.id, limit=5)})
    return render(request, "automations.html", automations=rows)


async def sessions(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    query = request.query.get("q", "").strip()
    hits = await Messages(gw.store).search(None, query, SEARCH_LIMIT) if query else []
    return render(request, "sessions.html", sessions=await Sessions(gw.store).recent(100), query=query, hits=hits)


def _owner_time(text: str, request: web.Request, name: str) -> str | None:
    """A `datetime-local` form value in the owner's zone -> ISO UTC; web.HTTPBadRequest names the field."""
    if not text:
        return None
    try:
        wall = datetime.fromisoformat(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: {text!r} is not a date and time like 2026-12-01T09:30") from None
    return iso(wall.replace(tzinfo=gateway_of(request).config.tz) if wall.tzinfo is None else wall)


async def audit(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    tool = request.query.get("tool", "").strip()
    since_text, until_text = request.query.get("since", ""), request.query.get("until", "")
    since = _owner_time(since_text, request, "since")
    until = _owner_time(until_text, request, "until")
    if since is None and until is None and not tool:
        since = iso(datetime.now(gw.config.tz) - timedelta(days=7))  # a week unless asked otherwise
    events = await Audit(gw.store).list(since=since, until=until, tool=tool or None, limit=AUDIT_LIMIT)
    return render(request, "audit.html", events=list(reversed(events)), tool=tool, since=since_text,
                  until=until_text, tools=sorted(t.name for ts in gw.toolsets for t in ts.tools), limit=AUDIT_LIMIT)


async def health_page(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    cfg = gw.config.model
    report = await health(gw.store, gw.services["surfaces"], gw.services,
                          cfg.model if gw.model is not None else "")
    return render(request, "health.html", health=report)


def add_routes(router: web.UrlDispatcher) -> None:
    for name, handler in (("tools", tools), ("toolsets", toolsets), ("approvals", approvals),
                          ("automations", automations), ("sessions", sessions), ("audit", audit),
                          ("health", health_page)):
        router.add_get(f"{PREFIX}/{name}", handler, name=name)
