"""The calendar toolset: read the owner's CalDAV calendars and, after approval, change them.

Every time the model or the owner sees is in the owner's zone (`ctx.tz`); how times are read and events
shown is `toolsets.calendar_format`. This module holds the tools, their previews and their effects.

Create, update and cancel wait for the owner's Approve. Their previews show the event (and, for an
update, each field's before -> after); their payload is the exact write: the whole iCalendar resource
and where it goes, with the ETag it applies to. The approved effect performs that write conditionally —
If-Match on that ETag (If-None-Match for a new event, so it cannot be created twice) — so an event
changed on the server after the prompt is refused, never overwritten. Without approval (a governance
override) the handlers build the same payload, checking the version the model named, and write it.

Several calendar accounts may be configured (`toolsets.accounts`): CalDAV ones (a password, or Google's
bearer token) and Microsoft ones over Graph (`connectors.graph_calendar`, the same interface). Every
tool takes an optional `account` (default: the first); a payload names its account, and a preview names
it when there are several.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from connectors.oauth_token import SignInNeeded, TokenUnavailable
from toolsets.accounts import AccountClients, accounts_of
from toolsets.base import (
    ApprovalPolicy,
    ExecutionPolicy,
    Policy,
    Preview,
    Risk,
    ToolContext,
    ToolError,
    Toolset,
)
from toolsets.calendar_format import (
    OptTitle,
    OptWhen,
    When,
    change_text,
    day_text,
    event_card,
    event_diff,
    event_fields,
    event_line,
    event_ref,
    range_bound,
    when_text,
)
from toolsets.flat_args import OptStr, OptStrs
from toolsets.limits import Title

# The client and the iCalendar mapping (`connectors.calendar`, with CalDAV's XML and `connectors.ical`)
# are the [calendar] service's: the handlers import them, so registering the toolset loads neither.
if TYPE_CHECKING:
    from connectors.calendar import CalendarClient, Event, EventFields
    from connectors.graph_calendar import GraphCalendar

    Client = CalendarClient | GraphCalendar

TOOLSET = Toolset(
    "calendar",
    "the owner's calendars: list and read events; create, change or cancel events (after approval)",
    keywords=(
        r"\bcalendars?\b", r"\bmeetings?\b", r"\bappointments?\b", r"\bschedul(?:e|ed|ing)\b", r"\bagenda\b",
        r"\bevents?\b", r"\b(?:today|tomorrow|tonight)'?s? (?:plans|events|schedule)\b", r"\bfree (?:at|on)\b",
        r"\bbusy\b", r"\b(?:dentist|doctor)\b(?! (?:task|item|to-?do)s?\b)", r"\breschedul", r"\binvite\b",
        r"\bcall with\b", r"\bam i (?:free|available)\b", r"\bwhen(?:'s| is) my\b", r"\bstand-?up\b",
        r"\banything (?:on|planned) (?:for )?(?:today|tonight|tomorrow|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b",
        r"\bwhat'?s (?:happening|on|planned) (?:today|tonight|tomorrow|this (?:morning|afternoon|evening|week))\b",
        r"\bblock (?:out )?(?:\d{1,3}|an?|two|three|some) (?:hours?|minutes?|time)\b",
        r"\bbook (?:a |the )?(?:lunch|dinner|table|meeting|call)\b",
        r"\b(?:let'?s|help me) plan (?:my|the|our) (?:day|morning|afternoon)\b",
        r"\b(?:lunch with|dinner with|coffee with|drinks with|brunch with|breakfast with) (?:my |the "
        r"|a )?\w{1,30} (?:on|at|tomorrow|tonight|next|this)\b",
        r"日历", r"日程", r"会议", r"开会", r"约会", r"预约", r"安排", r"行程", r"有空", r"有会", r"哪些会",
    ),
    requires="calendar",
    owners_only=True,  # the owner's calendars (their accounts): never a guest's, whatever [access] guest_toolsets says
)

CONFLICT = "the event changed on the server since you approved; nothing was changed"
MAX_RANGE = timedelta(days=366)
_FIELD_ARGS = {"title", "start", "end", "location", "description", "attendees", "repeat"}
_MUTATION: Policy = {"risk": Risk.RUNTIME_HIGH, "approval": ApprovalPolicy.ALWAYS, "execution": ExecutionPolicy.CONFIRM}


def _accounts(ctx: ToolContext) -> AccountClients[Client]:
    return accounts_of(ctx, "calendar", "calendar")


async def _client(ctx: ToolContext, account: str | None) -> Client:
    """The client of the calendar account `account` names (the first without one)."""
    with _errors():
        return (await _accounts(ctx).pick(account))[1]


def _named(ctx: ToolContext, account: str | None) -> str:
    """How a preview names the account it writes to: " (account work (microsoft))" when there are several."""
    accounts = _accounts(ctx)
    return f" (account {accounts.label(accounts.known(account))})" if len(accounts) > 1 else ""


@contextmanager
def _errors() -> Iterator[None]:
    """Connector failures become tool results the model can read and act on."""
    from connectors.calendar import CalendarConflict, CalendarError

    try:
        yield
    except CalendarConflict:
        raise ToolError(CONFLICT) from None
    except (CalendarError, SignInNeeded, TokenUnavailable) as exc:
        raise ToolError(str(exc)) from None


def _fields_of(tz: ZoneInfo, args: BaseModel) -> EventFields:
    """The event fields of a create or update call's arguments (for its preview)."""
    return event_fields(tz, **args.model_dump(include=_FIELD_ARGS))


# -- previews: what an approval shows and binds -----------------------------------------------------

async def _preview_new(ctx: ToolContext, fields: EventFields, calendar: str | None, account: str | None) -> Preview:
    from connectors import ical

    client = await _client(ctx, account)
    with _errors():
        cal = await client.calendar(calendar)
        event = ical.new_event(fields)
    text = f"Create an event in {cal.name}{_named(ctx, account)}:\n{event_card(event, ctx.tz)}"
    return Preview(text=text, payload={"href": client.href_for(cal, event.uid), "etag": None, "uid": event.uid,
                                       "calendar": cal.name, "source": event.source,
                                       "account": _accounts(ctx).known(account)})


def _update_payload(ctx: ToolContext, account: str | None, before: Event, after: Event) -> dict[str, Any]:
    if not before.etag:
        raise ToolError(f"the server gave no version (ETag) for event {before.uid!r}; not changing it blindly")
    return {"href": before.href, "etag": before.etag, "uid": before.uid, "calendar": before.calendar,
            "source": after.source, "changes": event_diff(before, after, ctx.tz),
            "account": _accounts(ctx).known(account)}


def _cancel_payload(ctx: ToolContext, account: str | None, event: Event) -> dict[str, Any]:
    if not event.etag:
        raise ToolError(f"the server gave no version (ETag) for event {event.uid!r}; not deleting it blindly")
    return {"href": event.href, "etag": event.etag, "summary": event.summary, "when": when_text(event, ctx.tz),
            "account": _accounts(ctx).known(account)}


async def _changed(ctx: ToolContext, event_id: str, calendar: str | None, fields: EventFields,
                   account: str | None) -> tuple[Event, Event]:
    from connectors import ical

    client = await _client(ctx, account)
    with _errors():
        before = await client.get_event(event_id, calendar)
        after = ical.apply_changes(before, fields)
    if not event_diff(before, after, ctx.tz):
        raise ToolError(f"nothing would change in event {event_id}; say which fields to change")
    return before, after


def _stale(event: Event, version: str) -> str:
    return "" if event.version == version else (
        f"\nWarning: the event changed on the server since version {version} was read "
        f"(now {event.version}); read it again with calendar_get.")


async def _current(ctx: ToolContext, event_id: str, version: str, calendar: str | None,
                   account: str | None) -> Event:
    """The event as it is now, refused unless it is still the version the model (and owner) saw."""
    from connectors.calendar import CalendarConflict

    event = await (await _client(ctx, account)).get_event(event_id, calendar)
    if event.version != version:
        raise CalendarConflict(f"event {event_id} is at version {event.version}, not {version}")
    return event


# -- tools ------------------------------------------------------------------------------------------

@TOOLSET.tool()
async def calendar_status(ctx: ToolContext, account: OptStr = None) -> str:
    """List the calendar accounts, check their servers, and list their calendars.

    Args:
        account: Only this account; default all.
    """
    from connectors.calendar import CalendarError

    accounts = _accounts(ctx)

    async def one(name: str) -> str:
        try:
            _, client = await accounts.pick(name)
            calendars = await client.calendars(refresh=True)
            default = await client.calendar()
        except (SignInNeeded, TokenUnavailable) as exc:
            return str(exc)
        except CalendarError as exc:
            return f"Calendar server {client.server}: not working: {exc}"
        names = [f"- {c.name}{' (new events go here)' if c == default else ''}" for c in calendars]
        head = f"Calendar server {client.server}, user {client.user or '(no login)'}: working. Calendars:"
        return "\n".join([head, *names])

    names = [accounts.known(account)] if account else accounts.names
    found = await asyncio.gather(*(one(n) for n in names))
    if len(accounts) == 1:
        return found[0]
    return "\n".join(f"Account {accounts.label(n)}{' (the default)' if n == accounts.default else ''}:\n" + text
                     for n, text in zip(names, found, strict=True))


@TOOLSET.tool(visible_chars=8000)
async def calendar_list(ctx: ToolContext, start: When, end: When, calendar: OptStr = None,
                        account: OptStr = None) -> str:
    """List events in a range (repeats expanded). Times: YYYY-MM-DD or YYYY-MM-DDTHH:MM, owner's zone.

    Args:
        end: A day is included, a moment excluded.
        calendar: Only this calendar; default all.
        account: Calendar account (calendar_status lists them); default the first.
    """
    lo, hi = range_bound(start, ctx.tz), range_bound(end, ctx.tz, end=True)
    if hi <= lo:
        raise ToolError(f"end ({hi.isoformat()}) is not after start ({lo.isoformat()})")
    if hi - lo > MAX_RANGE:
        raise ToolError("list at most one year at a time")
    with _errors():
        listing = await (await _client(ctx, account)).events(lo, hi, calendar)
    lo, hi = lo.astimezone(ctx.tz), hi.astimezone(ctx.tz)
    span = f"from {day_text(lo)} {lo:%H:%M} to {day_text(hi)} {hi:%H:%M} ({ctx.tz.key})"
    events = listing.events
    # Titles, places and descriptions are written by whoever sent the invitation: outside content. So
    # are the notes on cut series, which name the event.
    body = "\n".join([*(event_line(e, ctx.tz) for e in events), *(f"Note: {n}." for n in listing.notes)])
    if not events:
        head = f"No events {span}."
        return head + "\n" + ctx.external(f"calendar events {span}", body) if body else head
    count = f"{len(events)} event{'' if len(events) == 1 else 's'}"
    return f"{count} {span}:\n" + ctx.external(f"calendar events {span}", body)


@TOOLSET.tool()
async def calendar_get(ctx: ToolContext, event_id: str, calendar: OptStr = None, account: OptStr = None) -> str:
    """Read one event in full, with the version that changes quote."""
    client = await _client(ctx, account)
    with _errors():
        event = await client.get_event(event_id, calendar)
    return f"{event_ref(event)}\n" + ctx.external(f"calendar event {event.uid}", event_card(event, ctx.tz))


@TOOLSET.tool()
async def calendar_draft(ctx: ToolContext, event_id: OptStr = None, title: OptTitle = None,
                         start: OptWhen = None, end: OptWhen = None, location: OptStr = None,
                         description: OptStr = None, attendees: OptStrs = None,
                         repeat: OptStr = None, calendar: OptStr = None, account: OptStr = None) -> str:
    """Preview a new event, or a change to event_id (fields as calendar_create/update). Saves nothing."""
    fields = event_fields(ctx.tz, title=title, start=start, end=end, location=location, description=description,
                          attendees=attendees, repeat=repeat)
    if event_id is None:
        preview = await _preview_new(ctx, fields, calendar, account)
        return f"Draft only, nothing saved.\n{preview.text}\nTo save it, call calendar_create with these fields."
    before, after = await _changed(ctx, event_id, calendar, fields, account)
    # The event as it stands on the server is outside content (whoever sent the invitation wrote it).
    change = ctx.external(f"calendar event {before.uid}", change_text(before, after, ctx.tz))
    return (f"Draft only, nothing saved.\n{change}\n"
            f"To apply it, call calendar_update with event_id={before.uid} version={before.version}.")


@TOOLSET.tool(**_MUTATION)
async def calendar_create(ctx: ToolContext, title: Title, start: When, end: OptWhen = None,
                          location: OptStr = None, description: OptStr = None,
                          attendees: OptStrs = None, repeat: OptStr = None,
                          calendar: OptStr = None, account: OptStr = None) -> str:
    """Create an event (after the owner approves).

    Args:
        start: YYYY-MM-DD (all-day) or YYYY-MM-DDTHH:MM (owner's zone).
        end: Last day (included) or end moment; default 1 hour (1 day) later.
        attendees: Email addresses.
        repeat: RFC 5545 rule, e.g. FREQ=WEEKLY;BYDAY=MO.
    """
    fields = event_fields(ctx.tz, title=title, start=start, end=end, location=location, description=description,
                          attendees=attendees, repeat=repeat)
    return await _put(ctx, None, (await _preview_new(ctx, fields, calendar, account)).payload)


@TOOLSET.tool(**_MUTATION)
async def calendar_update(ctx: ToolContext, event_id: str, version: str, title: OptTitle = None,
                          start: OptWhen = None, end: OptWhen = None, location: OptStr = None,
                          description: OptStr = None, attendees: OptStrs = None,
                          repeat: OptStr = None, calendar: OptStr = None, account: OptStr = None) -> str:
    """Change an event (after the owner approves); only given fields change; a series as a whole.
    "" clears location, description or repeat; attendees is the whole new list.

    Args:
        version: As calendar_list/get/draft show it.
        start: Without end, the duration is kept.
    """
    from connectors import ical
    from connectors.calendar import EventFields

    fields = event_fields(ctx.tz, title=title, start=start, end=end, location=location, description=description,
                          attendees=attendees, repeat=repeat)
    if fields == EventFields():
        raise ToolError("no field to change; give at least one of title, start, end, location, description, "
                        "attendees, repeat")
    with _errors():
        before = await _current(ctx, event_id, version, calendar, account)
        after = ical.apply_changes(before, fields)
    return await _put(ctx, None, _update_payload(ctx, account, before, after))


@TOOLSET.tool(**_MUTATION)
async def calendar_cancel(ctx: ToolContext, event_id: str, version: str, calendar: OptStr = None,
                          account: OptStr = None) -> str:
    """Delete an event, a series as a whole (after the owner approves).

    Args:
        version: As calendar_list/get/draft show it.
    """
    with _errors():
        event = await _current(ctx, event_id, version, calendar, account)
    return await _delete(ctx, None, _cancel_payload(ctx, account, event))


@calendar_create.effect
@calendar_update.effect
async def _put(ctx: ToolContext, args: Any, payload: dict[str, Any]) -> str:
    """Write the payload's event: created only where none exists, updated only over the ETag shown."""
    client = await _client(ctx, payload.get("account"))  # approvals from before accounts name none
    with _errors():
        event = await client.put_event(payload["href"], payload["source"], payload["uid"], payload["calendar"],
                                       etag=payload["etag"])
    if payload["etag"] is None:
        return f"Created {event_ref(event)}:\n{event_card(event, ctx.tz)}"
    return f"Updated {event_ref(event)}:\n" + "\n".join(payload["changes"])


@calendar_cancel.effect
async def _delete(ctx: ToolContext, args: Any, payload: dict[str, Any]) -> str:
    """Delete the payload's event, only while it is still at the ETag shown."""
    client = await _client(ctx, payload.get("account"))
    with _errors():
        await client.delete_at(payload["href"], payload["etag"])
    return f"Cancelled \"{payload['summary']}\" ({payload['when']})."


@calendar_create.preview
async def _preview_create(ctx: ToolContext, args: Any) -> Preview:
    return await _preview_new(ctx, _fields_of(ctx.tz, args), args.calendar, args.account)


@calendar_update.preview
async def _preview_update(ctx: ToolContext, args: Any) -> Preview:
    before, after = await _changed(ctx, args.event_id, args.calendar, _fields_of(ctx.tz, args), args.account)
    text = change_text(before, after, ctx.tz, _named(ctx, args.account)) + _stale(before, args.version)
    return Preview(text=text, payload=_update_payload(ctx, args.account, before, after))


@calendar_cancel.preview
async def _preview_cancel(ctx: ToolContext, args: Any) -> Preview:
    client = await _client(ctx, args.account)
    with _errors():
        event = await client.get_event(args.event_id, args.calendar)
    text = f"Cancel (delete) this event{_named(ctx, args.account)}:\n{event_card(event, ctx.tz)}" \
        + _stale(event, args.version)
    return Preview(text=text, payload=_cancel_payload(ctx, args.account, event))
