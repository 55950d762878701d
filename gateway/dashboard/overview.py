"""The dashboard's home: what needs the owner (approvals, people asking to pair, failing health), what
is coming (the next reminders and automations), and what it cost (tokens and money per day, 30 days; the
budget's caps and what is left of them)."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from aiohttp import web
from markupsafe import Markup

from gateway.dashboard.chart import Bar, bar_chart
from gateway.dashboard.context import gateway_of, render
from gateway.dashboard.health import health
from gateway.services.usage import summary
from store.access import AccessRepo
from store.approvals import Approvals
from store.records import iso
from store.usage import UsageRepo

DAYS = 30
NEXT_UP = 5


async def overview(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    report = await health(gw.store, gw.services["surfaces"], gw.services,
                          gw.config.model.model if gw.model is not None else "")
    lines = [*report.surfaces, report.scheduler, report.model, *(x for v in report.reported.values() for x in v)]
    coming = [r for r in await gw.services["automations"].list_all() if r.enabled and r.next_run_at]
    coming.sort(key=lambda r: r.next_run_at or "")
    days, chart, total = await _cost(gw)
    budget = await gw.services["budget"].report() if "budget" in gw.services else []
    return render(request, "overview.html", pending=await Approvals(gw.store).list(("pending",)),
                  strangers=await AccessRepo(gw.store).pending(), failing=[x for x in lines if not x.ok],
                  coming=coming[:NEXT_UP], days=days, chart=Markup(chart), total=total,
                  budget=budget)


async def pairing(request: web.Request) -> web.Response:
    repo = AccessRepo(gateway_of(request).store)
    return render(request, "pairing.html", strangers=await repo.pending(), guests=await repo.admitted())


async def _cost(gw: Any) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """Per day of the owner's last 30 (midnight to midnight in their zone): tokens and cost; the chart."""
    tz = gw.config.tz
    today = datetime.now(tz).date()
    repo = UsageRepo(gw.store)
    days = []
    for n in range(DAYS - 1, -1, -1):
        day = today - timedelta(days=n)
        start = datetime.combine(day, time(), tz)
        end = datetime.combine(day + timedelta(days=1), time(), tz)
        data = summary(await repo.totals(since=iso(start), until=iso(end)), gw.config.model)["total"]
        days.append({"day": day, "tokens": data["input_tokens"] + data["output_tokens"], "cost": data["cost"],
                     "calls": data["calls"]})
    bars = [Bar(label=f"{d['day']:%d %b}", value=d["tokens"],
                title=f"{d['day']:%a %d %b}: {d['tokens']:,} tokens in {d['calls']} calls"
                      + (f", {d['cost']:.2f}" if d["cost"] is not None else "")) for d in days]
    costs = [d["cost"] for d in days if d["cost"] is not None]
    total = {"tokens": sum(d["tokens"] for d in days), "cost": sum(costs) if costs else None}
    return days, bar_chart(bars, f"tokens per day, last {DAYS} days"), total
