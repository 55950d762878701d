"""Admin commands: doctor, tools, approvals, audit, pairing, automations. They work on the same store
as the resident process and never fire schedules."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from gateway.cli import mcp as mcp_cli
from gateway.cli.doctor import doctor
from gateway.services.usage import add_parser as add_usage_parser

# Each command imports what it works with when it runs, so building the parser (`anyy --help`) and
# running one command load no other command's dependencies.
if TYPE_CHECKING:
    from gateway.automations.scheduler import AutomationService
    from gateway.config import Config
    from store.db import Store


class AdminError(Exception):
    """An admin command could not do what was asked; the message says why."""


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    sub.add_parser("doctor", parents=[common],
                   help="check config, store, model, surfaces, connectors").set_defaults(fn=doctor)
    add_usage_parser(sub, common)
    p = sub.add_parser("tools", parents=[common], help="the tool catalog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=tools)
    mcp_cli.add_parsers(sub, common)

    p = sub.add_parser("approvals", parents=[common], help="list and decide approvals")
    a = p.add_subparsers(dest="action", required=True)
    x = a.add_parser("list", parents=[common])
    x.add_argument("--all", action="store_true", help="include decided ones")
    x.set_defaults(fn=approvals_list)
    x = a.add_parser("approve", parents=[common])
    x.add_argument("id")
    x.set_defaults(fn=approvals_decide, approve=True, reason=None)
    x = a.add_parser("deny", parents=[common])
    x.add_argument("id")
    x.add_argument("--reason")
    x.set_defaults(fn=approvals_decide, approve=False)

    p = sub.add_parser("audit", parents=[common], help="the audit trail")
    p.add_argument("--since", type=since_arg, help=f"from when: {SINCE_HELP}")
    p.add_argument("--tool", help="only the events of this tool, e.g. email_send")
    p.add_argument("--json", action="store_true", help="one JSON array of events")
    p.set_defaults(fn=audit)

    p = sub.add_parser("pairing", parents=[common], help="admit people who asked to talk to Anyy")
    a = p.add_subparsers(dest="action", required=True)
    a.add_parser("list", parents=[common]).set_defaults(fn=pairing_list)
    x = a.add_parser("approve", parents=[common])
    x.add_argument("surface", choices=["telegram", "slack"])
    x.add_argument("code")
    x.set_defaults(fn=pairing_approve)
    x = a.add_parser("revoke", parents=[common])
    x.add_argument("surface", choices=["telegram", "slack"])
    x.add_argument("user_id")
    x.set_defaults(fn=pairing_revoke)

    p = sub.add_parser("dashboard", parents=[common], help="the browser dashboard served by `anyy run`")
    a = p.add_subparsers(dest="action", required=True)
    a.add_parser("url", parents=[common], help="print the login link (it carries the secret token)").set_defaults(
        fn=dashboard_url)

    p = sub.add_parser("automations", parents=[common], help="list and delete automations and reminders")
    a = p.add_subparsers(dest="action", required=True)
    a.add_parser("list", parents=[common]).set_defaults(fn=automations_list)
    x = a.add_parser("delete", parents=[common])
    x.add_argument("id")
    x.set_defaults(fn=automations_delete)
    x = a.add_parser("secret", parents=[common], help="replace a webhook automation's secret and print the new one")
    x.add_argument("id")
    x.set_defaults(fn=automations_secret)


TOOLS_COLUMNS = ("toolset", "tool", "risk", "approval", "execution")


async def tools(config: Config, args: argparse.Namespace) -> int:
    from gateway.services.availability import availability
    from toolsets.registry import TOOLSETS
    avail = availability(config)  # what the runtime builds, so what this lists is what the model can have
    rows: list[dict[str, Any]] = []
    for ts in TOOLSETS:
        present = ts.present(avail)
        here = {t.name for t in present.tools} if present is not None else set()
        for t in ts.tools:
            row = {"toolset": ts.name, "tool": t.name, "risk": str(t.descriptor.risk),
                   "approval": str(t.descriptor.approval), "execution": str(t.descriptor.execution),
                   "visible_chars": t.descriptor.output_budget.visible_chars,
                   "requires": t.requires or ts.requires, "available": t.name in here}
            if t.name not in here:  # "why_not" only where a tool is not available
                row["why_not"] = avail.why_absent(ts.requires) or avail.why_absent(t.requires)
            rows.append(row)
    mcp_rows, down = await mcp_cli.tool_rows(config)  # connects to the enabled MCP servers to list them
    rows += mcp_rows
    for note in down:
        print(f"anyy: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    # Columns as wide as their longest entry: an MCP tool name (mcp_server__tool) can be 60 characters.
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in TOOLS_COLUMNS}
    print("  ".join(c.upper().ljust(widths[c]) for c in TOOLS_COLUMNS).rstrip())
    said = ""
    for r in rows:  # why a tool is not available, said on the first row of a run of the same reason
        why = r.get("why_not", "")
        note = "" if r["available"] else f"  (not available{': ' + why if why != said else ''})"
        said = why
        print("  ".join(str(r[c]).ljust(widths[c]) for c in TOOLS_COLUMNS).rstrip() + note)
    return 0


async def approvals_list(config: Config, args: argparse.Namespace) -> int:
    from store.approvals import Approvals
    async with config.new_store() as store:
        recs = await Approvals(store).list(None if args.all else ("pending",))
    if not recs:
        print("No approvals." if args.all else "Nothing is waiting for approval.")
    for r in recs:
        first = r.preview.splitlines()[0] if r.preview else ""
        print(f"{r.id}  {r.state:<9} {r.tool:<16} {_local(config, r.created_at)}  {first[:60]}")
    return 0


async def approvals_decide(config: Config, args: argparse.Namespace) -> int:
    """Decide from the CLI. Executing needs the tools and connectors, so this starts a non-resident
    gateway (no surfaces, no schedules); the resident process delivers the resulting messages."""
    from gateway.app import Gateway
    gw = Gateway(config, surfaces=[], resident=False)
    await gw.start()
    try:
        answer = await gw.approvals.decide(args.id, "cli:owner", args.approve, args.reason, owner=True)
        await gw.idle()
        rec = await gw.approvals.repo.get(args.id)
    finally:
        await gw.stop()
    if rec is None or rec.state in ("pending", "denied"):
        print(answer)
    else:
        print(f"{answer} Now: {rec.state}. {rec.result or ''}")
    return 0 if rec is not None else 1


SINCE_HELP = "today, yesterday, 7d, 12h, or a local ISO date or time such as 2026-11-30 or 2026-11-30T09:00"
_AGO = re.compile(r"(\d+)([dh])")


def parse_since(text: str, tz: ZoneInfo, now: datetime) -> datetime:
    """`--since` as an aware instant: "today", "yesterday" (local midnights), "7d", "12h" (ago), or an
    ISO date or time in `tz`. Raises ValueError naming the accepted forms."""
    word = text.strip().lower()
    midnight = datetime.combine(now.astimezone(tz).date(), time(), tz)
    if word in ("today", "yesterday"):
        return midnight - timedelta(days=1 if word == "yesterday" else 0)
    if m := _AGO.fullmatch(word):
        return now - timedelta(**{"days" if m[2] == "d" else "hours": int(m[1])})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"cannot read {text!r}: use {SINCE_HELP}") from None
    return at if at.tzinfo else at.replace(tzinfo=tz)


def since_arg(text: str) -> str:
    """argparse's check of `--since` (the zone is applied once the config is read): exit 2 naming it."""
    from store.records import utcnow
    try:
        parse_since(text, ZoneInfo("UTC"), utcnow())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


async def audit(config: Config, args: argparse.Namespace) -> int:
    from store.audit import Audit
    from store.records import iso, utcnow
    since = iso(parse_since(args.since, config.tz, utcnow())) if args.since else None
    async with config.new_store() as store:
        events = await Audit(store).list(since=since, limit=1000, tool=args.tool)
    if args.json:
        print(json.dumps([e.model_dump() for e in events], indent=2, ensure_ascii=False))
        return 0
    if not events:
        what = (f" of {args.tool}" if args.tool else "") + (f" since {args.since}" if since else "")
        print(f"No audit events{what}.")
    for e in events:
        extra = f" {json.dumps(e.detail, ensure_ascii=False)}" if e.detail else ""
        print(f"{_local(config, e.at, seconds=True)} {e.actor:<20} {e.action:<18} {e.tool or '':<16} "
              f"{e.subject or ''}{extra}")
    return 0


async def pairing_list(config: Config, args: argparse.Namespace) -> int:
    from store.access import AccessRepo
    async with config.new_store() as store:
        repo = AccessRepo(store)
        pending, admitted = await repo.pending(), await repo.admitted()
    print("Pending codes:" if pending else "No pending pairing codes.")
    for p in pending:
        print(f"  {p.surface:<9} {p.code}  user {p.user_id} ({p.user_name or '?'})  "
              f"expires {_local(config, p.expires_at)}")
    if admitted:
        print("Admitted users:")
        for surface, user_id, added in admitted:
            print(f"  {surface:<9} {user_id}  since {_local(config, added)}")
    return 0


async def pairing_approve(config: Config, args: argparse.Namespace) -> int:
    from store.access import AccessRepo
    async with config.new_store() as store:
        rec = await AccessRepo(store).redeem(args.surface, args.code)
    if rec is None:
        raise AdminError(f"no pending {args.surface} pairing code {args.code!r} (codes expire after an hour)")
    print(f"Admitted {args.surface} user {rec.user_id} ({rec.user_name or '?'}).")
    return 0


async def pairing_revoke(config: Config, args: argparse.Namespace) -> int:
    """Revoke completely: admission, pending approvals (their prompts are edited; the resident process
    delivers the edits) and automations. A non-resident gateway, as for deciding approvals."""
    from gateway.app import Gateway
    gw = Gateway(config, surfaces=[], resident=False)
    await gw.start()
    try:
        done = await gw.access.revoke(args.surface, args.user_id, gw.approvals, gw.services["automations"])
        await gw.idle()
    finally:
        await gw.stop()
    if done is None:
        raise AdminError(f"{args.surface} user {args.user_id} was not admitted by pairing")
    cancelled, disabled = done
    print(f"Revoked {args.surface} user {args.user_id}: {cancelled} pending approval(s) cancelled, "
          f"{disabled} automation(s) disabled.")
    return 0


async def dashboard_url(config: Config, args: argparse.Namespace) -> int:
    """Print the dashboard's login link, creating the token on first use."""
    from gateway.dashboard import load_or_create_token, login_url
    token = await asyncio.to_thread(load_or_create_token, config.data_dir)
    if not config.dashboard.enabled:
        print(f"note: [dashboard] enabled = false in {config.source}; `anyy run` does not serve it", file=sys.stderr)
    print(login_url(config.dashboard, token))
    return 0


async def automations_list(config: Config, args: argparse.Namespace) -> int:
    async with config.new_store() as store:
        rows = await _automations(store, config).list_all()
    if not rows:
        print("No automations.")
    for r in rows:
        state = "" if r.enabled else " (disabled)"
        due = _local(config, r.next_run_at) if r.next_run_at else _on_event(r.schedule, config)
        print(f"{r.id}  {r.user_key:<18} next {due}  {r.name}{state}")
    return 0


def _on_event(schedule: dict[str, object], config: Config) -> str:
    """What a row without a next run waits for: "on each event (webhook /hooks/ci)" for a trigger, else "-"."""
    from toolsets.schedule import describe, parse_schedule

    parsed = parse_schedule(schedule)
    return f"on each event ({describe(parsed, config.tz)})" if parsed.event_driven else "-"


async def automations_delete(config: Config, args: argparse.Namespace) -> int:
    from toolsets.schedule import AutomationError
    async with config.new_store() as store:
        try:
            await _automations(store, config).admin_delete(args.id, actor="cli:owner")
        except AutomationError as exc:
            raise AdminError(str(exc)) from None
    print(f"Deleted automation {args.id}.")
    return 0


async def automations_secret(config: Config, args: argparse.Namespace) -> int:
    """Rotate a webhook automation's secret: the old one stops working at once, the new one is shown once."""
    from gateway.services.webhooks import WebhookService
    from store.automations import Automations
    async with config.new_store() as store:
        row = await Automations(store).get(args.id)
        if row is None:
            raise AdminError(f"no automation {args.id}")
        if row.schedule.get("type") != "webhook":
            raise AdminError(f"automation {args.id} is not a webhook (its schedule is {row.schedule.get('type')})")
        secret = await WebhookService(store, config.data_dir, _no_fire).issue(row.id)
    print(f"New secret for webhook {row.schedule.get('name')} ({row.id}); it is shown only now:\n{secret}")
    return 0


async def _no_fire(automation_id: str, event: Any) -> bool:
    return False  # the CLI only issues secrets; the resident fires


def _automations(store: Store, config: Config) -> AutomationService:
    """The service in admin mode: rows only, no scheduler (the resident process picks changes up)."""
    from gateway.automations.scheduler import AutomationService
    from store.outbox import Outbox
    return AutomationService(store, config.tz, Outbox(store).enqueue)


def _local(config: Config, stamp: str, *, seconds: bool = False) -> str:
    """A stored UTC time as the owner reads it: their zone, with its name ("2026-12-01 09:00 CET")."""
    from store.records import parse_iso
    return parse_iso(stamp).astimezone(config.tz).strftime(f"%Y-%m-%d %H:%M{':%S' if seconds else ''} %Z")
