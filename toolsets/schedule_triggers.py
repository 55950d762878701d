"""The event schedules of automations (triggers): new mail, before each calendar event, a webhook.

    {"type": "email", "account": "personal", "folder": "INBOX", "from": ["*@bank.example"],
     "subject": "statement", "verified_sender": true}
    {"type": "before_event", "minutes": 10, "account": "work", "calendar": "Work"}
    {"type": "webhook", "name": "ci"}

Events fire them, never the clock: `next_fire` is always None. A reminder action on a trigger delivers
a line filled from the event (`render_line`) with no model call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import ConfigDict, Field, field_validator

from toolsets.schedule_base import ScheduleBase, ScheduleError

MAX_PATTERNS = 50
_ADDRESS = re.compile(r"^(?:\*@|[^@\s*]+@)[^@\s*]+\.[^@\s*]+$")
_HOOK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FIELD = re.compile(r"\{(\w+)\}")
# What makes outside text Markdown (the line is rendered as Markdown by the surfaces): inline markup
# anywhere, and the block markers a line may start with (a heading, a list, a quote, a setext underline).
# The escapes are how the line marks its outside spans: every surface parses it as CommonMark, where they
# become text nodes, and shows text nodes as written in its own syntax (`Renderer.escape`: Telegram HTML,
# Slack mrkdwn, the console raw). Chosen over carrying span offsets on the Outbound, which would need a
# second path through each renderer and would not survive the split into messages as this does.
_INLINE_MARKUP = re.compile(r"([\\`*_~\[\]<>&|])")
_LINE_START = re.compile(r"^([#+\-=>]|\d+(?=[.)]))")
_LINE_CHARS = 300

DEFAULT_LINES = {
    "email": "📧 {from}: {subject}",
    "before_event": "📅 {title} at {time} in {location}",
    "webhook": "🔔 {name}: {summary}",
}


class _Trigger(ScheduleBase):
    @property
    def event_driven(self) -> bool:
        return True

    def next_fire(self, after: datetime, anchor: datetime | None, default_tz: ZoneInfo) -> datetime | None:
        return None


def _account(v: str | None) -> str | None:
    if v is not None and not _ACCOUNT.match(v):
        raise ScheduleError(f"account {v!r} is not an account name (letters, digits, . _ -)")
    return v


class EmailTrigger(_Trigger):
    """Fire for each new message in a mail folder that passes every filter given."""

    model_config = ConfigDict(extra="forbid", defer_build=True, populate_by_name=True, serialize_by_alias=True)

    type: Literal["email"]
    account: str | None = Field(default=None, description="account name; default: the [email] mailbox")
    folder: str = Field(default="INBOX", min_length=1, max_length=200)
    senders: list[str] = Field(default_factory=list, alias="from",
                               description='addresses or "*@domain" patterns; any may match')
    subject: str | None = Field(default=None, min_length=1, max_length=200,
                                description="text the subject contains (case-insensitive)")
    verified_sender: bool = Field(default=False,
                                  description="only mail whose sender the receiving server verified (DMARC/DKIM)")

    @field_validator("account")
    @classmethod
    def _account_name(cls, v: str | None) -> str | None:
        return _account(v)

    @field_validator("senders")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        if len(v) > MAX_PATTERNS:
            raise ScheduleError(f"at most {MAX_PATTERNS} sender patterns")
        cleaned = [p.strip().lower() for p in v]
        for p in cleaned:
            if not _ADDRESS.match(p):
                raise ScheduleError(f'sender {p!r} must be an address (ann@example.com) or "*@domain"')
        return cleaned


class BeforeEvent(_Trigger):
    """Fire `minutes` before each event that starts in a calendar (0 = at its start)."""

    type: Literal["before_event"]
    minutes: int = Field(ge=0, le=10080, description="minutes before the start (0-10080)")
    account: str | None = Field(default=None, description="account name; default: the [calendar] calendar")
    calendar: str | None = Field(default=None, max_length=200, description="calendar name; default: the first")
    all_day: bool = Field(default=False, description="also fire for all-day events")

    @field_validator("account")
    @classmethod
    def _account_name(cls, v: str | None) -> str | None:
        return _account(v)


class WebhookTrigger(_Trigger):
    """Fire for each authenticated POST to /hooks/<name> on the resident's HTTP listener."""

    type: Literal["webhook"]
    name: str = Field(description="lowercase letters, digits, - and _; the URL is /hooks/<name>")

    @field_validator("name")
    @classmethod
    def _hook_name(cls, v: str) -> str:
        if not _HOOK_NAME.match(v):
            raise ScheduleError(f"webhook name {v!r}: use 1-64 lowercase letters, digits, - and _")
        return v


TriggerModel = EmailTrigger | BeforeEvent | WebhookTrigger
TRIGGER_TYPES = ("email", "before_event", "webhook")


def render_line(template: str, fields: Mapping[str, str]) -> str:
    """`template` with each ``{field}`` replaced from the event's `fields` (unknown ones left as they are).

    Only plain names are replaced (no attribute or index lookups, unlike str.format), each value on one
    line, bounded and escaped as Markdown text, since it comes from outside: a sender's
    ``[Verify](https://…)`` shows as written inside the trusted notice, never as a link, mention or
    formatting. The template is the owner's own and stays Markdown. An empty "in {location}" is dropped."""
    if not fields.get("location"):
        template = template.replace(" in {location}", "")

    def value(m: re.Match[str]) -> str:
        raw = fields.get(m[1])
        if raw is None:
            return m[0]
        flat = " ".join(str(raw).split())
        return literal(flat if len(flat) <= _LINE_CHARS else flat[:_LINE_CHARS - 1] + "…")

    return _FIELD.sub(value, template)


def literal(text: str) -> str:
    """`text` backslash-escaped so that CommonMark shows it as written (one line of it)."""
    escaped = _INLINE_MARKUP.sub(r"\\\1", text)
    return _LINE_START.sub(lambda m: m[1] + "\\" if m[1].isdigit() else "\\" + m[1], escaped)


def describe_trigger(trigger: TriggerModel) -> str:
    """A short human description: "email personal/INBOX from *@bank.example", "10 min before events"."""
    if isinstance(trigger, EmailTrigger):
        where = f"{trigger.account}/{trigger.folder}" if trigger.account else trigger.folder
        parts = [f"email {where}"]
        if trigger.senders:
            parts.append("from " + ", ".join(trigger.senders[:3]) + ("…" if len(trigger.senders) > 3 else ""))
        if trigger.subject:
            parts.append(f"subject ~ {trigger.subject!r}")
        if trigger.verified_sender:
            parts.append("verified")
        return " ".join(parts)
    if isinstance(trigger, BeforeEvent):
        lead = f"{trigger.minutes} min before" if trigger.minutes else "at the start of"
        where = "/".join(p for p in (trigger.account, trigger.calendar) if p)
        return f"{lead} events" + (f" in {where}" if where else "") + (" (with all-day)" if trigger.all_day else "")
    return f"webhook /hooks/{trigger.name}"
