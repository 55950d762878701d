"""The automation toolset: reminders and scheduled prompts, as the model sees them.

The tools reach the gateway's automation service through `ctx.service("automations")` and act only
for `ctx.user_key`, delivering to `ctx.origin`. Only reminder and prompt actions exist here: script
jobs are never exposed to the model.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from pydantic import BaseModel, model_validator

from store.records import AutomationRecord, AutomationRun, Origin, parse_iso
from store.triggers import slot_time
from toolsets.base import ExecutionPolicy, Risk, Tool, ToolContext, ToolError, Toolset
from toolsets.briefing import configured_parts, set_briefing
from toolsets.limits import Name
from toolsets.schedule import (
    LEGACY_FIELDS,
    ActionModel,
    ActionSpec,
    AutomationError,
    ScheduleModel,
    ScheduleSpec,
    legacy_error,
    parse_schedule,
)
from toolsets.webhook_secret import hand_out_secret

TOOLSET = Toolset(
    "automation",
    "Reminders and scheduled automations: create, list, change, delete, run now, see past runs.",
    # A bare clock time ("at 3") or "schedule" is as often a calendar event ("a call with Ben on Friday
    # at 3"), so a time only counts next to a request to be told, and "schedule" only with what it schedules.
    keywords=(
        r"\bremind(?!\s+me\s+(?:which|what|who|where|how)\b)", r"\bautomations?\b", r"\balarm\b", r"\bcron\b",
        r"\bschedul(?:e|ed|ing)\b(?: (?:a|an|the|my|this|that))? (?:reminders?|messages?|texts?|jobs?|runs?|checks?"
        r"|automations?|reports?|summary|digest|briefing)\b",
        r"\bevery\s{1,3}(?:day|morning|evening|night|week|weekday|month|hour|monday|tuesday|wednesday|thursday"
        r"|friday|saturday|sunday|\d{1,4} ?(?:m|min|mins|minutes?|h|hours?|d|days?))\b",
        r"\beach\s{1,3}(?:morning|evening|day|week|month)\b",
        r"\b(?:nudge me|ping me|buzz me|wake me|alert me|notify me|text me|message me|call me"
        r"|warn me)\b(?: up)?[^.?!\n]{0,40}?\b(?:at \d|in (?:\d|an?\b|one\b|two\b|half\b)|tomorrow\b|tonight\b"
        r"|on (?:mon|tue|wed|thu|fri|sat|sun))",
        r"\b(?:at \d{1,2}(?::\d{2})? ?(?:am|pm)?|tomorrow|tonight)\b[^.?!\n]{0,30}?\b(?:nudge me|ping me|buzz me"
        r"|wake me|alert me|notify me|text me|message me|call me|warn me)\b",
        r"\bin\s{1,3}\d{1,4} ?(?:s|sec|seconds?|m|min|mins|minutes?|h|hours?)\b",
        r"\bin\s{1,3}(?:an?|one|two|\d{1,4})\s{1,3}(?:hours?|hrs?|minutes?|mins?)\b", r"\bwake\s{1,3}me\b",
        r"\b(?:morning|evening|daily|weekly|monthly|hourly) (?:\w{1,20} )?(?:briefing|summary|digest|report|reminder"
        r"|recap|update|check)s?\b",
        # Event triggers (issue 41): "tell me when CI posts", "when the bank writes, tell me", "ten minutes
        # before each meeting", "a briefing".
        r"\b(?:tell|notify|ping|alert|warn|text|message|let) me\b[^.?!\n]{0,15}?\b(?:when|whenever|as soon as|once)\b"
        r"[^.?!\n]{1,40}?\b(?:writes?|e-?mails?|posts?|sends?|messages?|arrives?|fails?|breaks?|comes? in|replies)\b",
        r"\b(?:when|whenever|as soon as)\b[^.?!\n]{1,40}?\b(?:writes?|e-?mails?|posts?|sends?|messages?|arrives?"
        r"|fails?|breaks?|comes? in|replies)\b[,;:\s]{1,3}(?:tell|notify|ping|alert|warn|text|message|let) me\b",
        r"\b(?:\d{1,3}|an?|one|two|five|ten|fifteen|twenty|thirty|half an) ?(?:m|min|mins|minutes?|hours?)\s{1,3}"
        r"before\s{1,3}(?:each|every|any|all|my)\b",
        r"\bbriefings?\b",
        r"提醒", r"每天", r"每周", r"每月", r"每小时", r"定时", r"闹钟", r"分钟后", r"小时后", r"点.{0,2}叫我",
        r"自动化",
    ),
    requires="automations",
)


class AutomationsAPI(Protocol):
    """What these tools need from the gateway's automation service."""

    async def list(self, user_key: str) -> builtins.list[AutomationRecord]: ...
    async def create(self, user_key: str, origin: Origin, name: str, schedule: ScheduleModel,
                     action: ActionModel) -> AutomationRecord: ...
    async def update(self, user_key: str, automation_id: str, *, name: str | None = None,
                     schedule: ScheduleModel | None = None, action: ActionModel | None = None,
                     enabled: bool | None = None) -> AutomationRecord: ...
    async def delete(self, user_key: str, automation_id: str) -> AutomationRecord: ...
    async def run_now(self, user_key: str, automation_id: str) -> AutomationRun: ...
    async def history(self, user_key: str, automation_id: str, limit: int = 10) -> builtins.list[AutomationRun]: ...


def _service(ctx: ToolContext) -> AutomationsAPI:
    service: AutomationsAPI | None = ctx.service("automations")
    if service is None:
        raise ToolError("automations are not available in this runtime")
    return service


def _local(stamp: str | None, tz: ZoneInfo) -> str | None:
    return parse_iso(stamp).astimezone(tz).isoformat(timespec="seconds") if stamp else None


def _view(rec: AutomationRecord, default_tz: ZoneInfo) -> dict[str, Any]:
    tz = parse_schedule(rec.schedule).zone(default_tz)
    return {"id": rec.id, "name": rec.name, "schedule": rec.schedule, "action": rec.action, "enabled": rec.enabled,
            "next_run": _local(rec.next_run_at, tz), "last_run": _local(rec.last_run_at, tz)}


class _RejectLegacy(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _no_legacy_fields(cls, data: Any) -> Any:
        legacy = [f for f in LEGACY_FIELDS if isinstance(data, dict) and f in data]
        if legacy:
            raise legacy_error(legacy)
        return data


def _rejects_legacy(tool: Tool) -> Tool:
    """Give the tool's arguments a clear error for top-level when/every/cron/recurring (older tools took
    them beside or instead of `schedule`), instead of a bare "extra inputs are not permitted"."""
    tool.args_mixins = (*tool.args_mixins, _RejectLegacy)
    return tool


def _served(ctx: ToolContext, schedule: ScheduleModel) -> str:
    """A trigger on mail or a calendar must name an account that serves it (a ToolError listing the
    accounts otherwise), so a typo fails now rather than never firing. Returns a note for the result: ""
    or why `verified_sender` can let nothing through on this account."""
    service = {"email": "email", "before_event": "calendar"}.get(schedule.type)
    if service is None:
        return ""
    accounts = ctx.service(service)
    if accounts is None:
        raise ToolError(f"no {'mailbox' if service == 'email' else 'calendar'} is configured, so this trigger "
                        "could never fire")
    known = getattr(accounts, "known", None)
    if known is None:
        return ""
    account = known(getattr(schedule, "account", None))
    if getattr(schedule, "verified_sender", False) and not accounts.auth_serv_id(account):
        return (f"sender verification is not available on account {account!r}: no auth_serv_id (its receiving "
                "server's Authentication-Results id) is configured, so no message passes verified_sender and "
                "this trigger will not fire until one is (docs/automations.md)")
    return ""


def _noted(view: dict[str, Any], note: str) -> dict[str, Any]:
    return {**view, "warning": note} if note else view


async def _guard(call: Any) -> Any:
    try:
        return await call
    except AutomationError as exc:
        raise ToolError(str(exc)) from None


@TOOLSET.tool()
async def automation_list(ctx: ToolContext) -> list[dict[str, Any]]:
    """List the user's reminders and automations with their next run in local time (soonest first)."""
    return [_view(r, ctx.tz) for r in await _service(ctx).list(ctx.user_key)]


@_rejects_legacy
@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT, steering=True)
async def automation_create(ctx: ToolContext, name: Name, schedule: ScheduleSpec, action: ActionSpec) -> dict[str, Any]:
    """Create a reminder, a scheduled automation, or a trigger (each new email, before each calendar event,
    each webhook call) that delivers to the current chat.

    Args:
        name: a short label, e.g. "call mum".
        schedule: when it fires; times are local wall-clock times.
        action: what it does.
    """
    note = _served(ctx, schedule.root)
    rec = await _guard(_service(ctx).create(ctx.user_key, ctx.origin, name, schedule.root, action.root))
    return _noted(await hand_out_secret(ctx, rec, _view(rec, ctx.tz)), note)


@_rejects_legacy
@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT, steering=True)
async def automation_update(ctx: ToolContext, id: str, name: Name | None = None, schedule: ScheduleSpec | None = None,
                            action: ActionSpec | None = None, enabled: bool | None = None) -> dict[str, Any]:
    """Change an automation; only the fields given change. A new schedule plans the next run from now.

    Args:
        id: the automation id from automation_list.
        name: a new label.
        schedule: a new schedule.
        action: a new action.
        enabled: false pauses it, true resumes it.
    """
    note = _served(ctx, schedule.root) if schedule is not None else ""
    rec = await _guard(_service(ctx).update(
        ctx.user_key, id, name=name, schedule=schedule.root if schedule else None,
        action=action.root if action else None, enabled=enabled))
    return _noted(await hand_out_secret(ctx, rec, _view(rec, ctx.tz)), note)


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def automation_briefing(ctx: ToolContext, at: str) -> str:
    """Set, move or turn off the user's daily morning briefing: today's events, important unread mail and due
    tasks, from the tools that are configured. Setting it again moves it; there is one per user.

    Args:
        at: the local time of day, e.g. "7:30", or "off" to remove it.
    """
    configured = configured_parts([n for n in ("calendar", "email") if ctx.service(n) is not None])
    return str(await _guard(set_briefing(_service(ctx), ctx.user_key, ctx.origin, at, configured)))


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def automation_delete(ctx: ToolContext, id: str) -> str:
    """Delete an automation and its run history.

    Args:
        id: the automation id from automation_list.
    """
    rec = await _guard(_service(ctx).delete(ctx.user_key, id))
    return f"deleted {rec.id} ({rec.name})"


@TOOLSET.tool(risk=Risk.RUNTIME_LOW)
async def automation_run(ctx: ToolContext, id: str) -> dict[str, Any]:
    """Run an automation once now, outside its schedule (which stays as it is), and report the result.

    Args:
        id: the automation id from automation_list.
    """
    run = await _guard(_service(ctx).run_now(ctx.user_key, id))
    return {"run": run.id, "status": run.status, "output": run.output}


@TOOLSET.tool()
async def automation_history(ctx: ToolContext, id: str, limit: int = 10) -> list[dict[str, Any]]:
    """The most recent runs of an automation, newest first.

    Args:
        id: the automation id from automation_list.
        limit: how many runs, 1 to 50.
    """
    runs = await _guard(_service(ctx).history(ctx.user_key, id, max(1, min(limit, 50))))
    return [{"scheduled_for": _local(slot_time(r.scheduled_for), ctx.tz), "status": r.status, "late": r.late,
             "output": r.output} for r in runs]

