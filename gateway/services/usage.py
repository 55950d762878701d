"""What the assistant costs: `/usage` in chat and `anyy usage` on the command line.

Every model call's tokens are stored with its reply; this sums them per model and per kind of session
(chat, automation, subagent — subagent and automation turns count too, labelled) and prices them when
`[model] price_in_per_mtok`, `price_out_per_mtok` and `price_cached_per_mtok` are set. Input tokens
include the cached ones; cached tokens are billed at the cached price instead of the input price.
Generated images (`image_generate`, audited) are counted from the audit trail.
"""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `add_parser` is part of `anyy --help`: the store is imported when a report is made
    from gateway.config import Config, ModelConfig
    from store.db import Store
    from store.usage import UsageTotal


def cost(t: UsageTotal, prices: ModelConfig) -> float | None:
    """The cost of `t` in the price's currency, or None when no price is configured."""
    if prices.price_in_per_mtok is None and prices.price_out_per_mtok is None:
        return None
    p_in = prices.price_in_per_mtok or 0.0
    p_cached = prices.price_cached_per_mtok if prices.price_cached_per_mtok is not None else p_in
    uncached = max(0, t.input_tokens - t.cached_tokens)
    return (uncached * p_in + t.cached_tokens * p_cached + t.output_tokens * (prices.price_out_per_mtok or 0.0)) / 1e6


def summary(totals: list[UsageTotal], prices: ModelConfig) -> dict[str, Any]:
    """Totals as plain data: overall, per model, per session kind, and costs where priced."""
    def add(rows: list[UsageTotal]) -> dict[str, Any]:
        out: dict[str, Any] = {k: sum(getattr(r, k) for r in rows)
                               for k in ("calls", "input_tokens", "output_tokens", "cached_tokens")}
        costs = [cost(r, prices) for r in rows]
        out["cost"] = round(sum(c for c in costs if c is not None), 6) if any(c is not None for c in costs) else None
        return out

    return {"total": add(totals),
            "by_model": {m: add([t for t in totals if t.model == m]) for m in sorted({t.model for t in totals})},
            "by_kind": {k: add([t for t in totals if t.kind == k]) for k in sorted({t.kind for t in totals})}}


def _line(label: str, s: dict[str, Any]) -> str:
    cached = f" ({s['cached_tokens']:,} cached)" if s["cached_tokens"] else ""
    price = f" ≈ {s['cost']:.4f}" if s["cost"] is not None else ""
    return f"{label}: {s['calls']} calls, {s['input_tokens']:,} in{cached}, {s['output_tokens']:,} out{price}"


def start_of_today(config: Config) -> datetime:
    return datetime.combine(datetime.now(config.tz).date(), time(), config.tz)


async def usage_report(store: Store, config: Config, user_key: str, session_id: str) -> str:
    """The `/usage` text: today, this session, the last 30 days, and per model."""
    from store.records import iso, utcnow
    from store.usage import UsageRepo
    repo = UsageRepo(store)
    today = summary(await repo.totals(since=iso(start_of_today(config)), user_key=user_key), config.model)
    session = summary(await repo.totals(since="", session_id=session_id), config.model)
    month_rows = await repo.totals(since=iso(utcnow() - timedelta(days=30)), user_key=user_key)
    month = summary(month_rows, config.model)
    lines = [_line("Today", today["total"]), _line("This conversation", session["total"]),
             _line("Last 30 days", month["total"])]
    lines += [_line(f"  {model or '(unknown model)'}", s) for model, s in month["by_model"].items()]
    lines += [_line(f"  {kind} turns", s) for kind, s in month["by_kind"].items() if kind != "chat"]
    images = await repo.tool_runs("image_generate", since=iso(utcnow() - timedelta(days=30)), user_key=user_key)
    if images:
        lines.append(f"Images generated (last 30 days): {images}")
    if config.model.price_in_per_mtok is None:
        lines.append("(Set [model] price_in_per_mtok / price_out_per_mtok to see costs.)")
    return "\n".join(lines)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("usage", parents=[common], help="tokens used and what they cost")
    p.add_argument("--since", type=date.fromisoformat,
                   help="from this day (YYYY-MM-DD, local time); default 30 days ago")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=usage_cli)


async def usage_cli(config: Config, args: argparse.Namespace) -> int:
    from store.records import iso, utcnow
    from store.usage import UsageRepo
    since = datetime.combine(args.since, time(), config.tz) if args.since else utcnow() - timedelta(days=30)
    async with config.new_store() as store:
        data = summary(await UsageRepo(store).totals(since=iso(since)), config.model)
        images = await UsageRepo(store).tool_runs("image_generate", since=iso(since))
    if args.json:
        print(json.dumps({"since": iso(since), **data, "images_generated": images}, indent=2))
        return 0
    print(_line(f"Since {since:%Y-%m-%d}", data["total"]))
    for model, s in data["by_model"].items():
        print(_line(f"  {model or '(unknown model)'}", s))
    for kind, s in data["by_kind"].items():
        print(_line(f"  {kind} turns", s))
    if images:
        print(f"Images generated: {images}")
    return 0
