"""Persisted records. Every layer speaks these types; the tables live in `store.migrations`."""

# No `from __future__ import annotations` here: pydantic would evaluate each field's annotation from
# its string, a part of building these records at every start.
import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """UTC ISO-8601 text, the one format every timestamp column uses (sorts lexically)."""
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


class Record(BaseModel):
    """The base of every record: its validator is built when the record is first used, so a process
    pays only for the kinds of record it touches (a chat uses a handful of the twenty)."""

    model_config = ConfigDict(defer_build=True)


class Origin(Record):
    """Where a conversation lives on a platform: replies, reminders and prompts go back here."""

    surface: str
    chat_id: str
    thread_id: str | None = None

    def key(self) -> str:
        return ":".join(p for p in (self.surface, self.chat_id, self.thread_id) if p)


class Attachment(Record):
    name: str
    mime_type: str = "application/octet-stream"
    size: int = 0
    path: str = ""


class Inbound(Record):
    """One message from a person, translated from a platform event by a surface."""

    surface: str
    chat_id: str
    user_id: str
    text: str
    thread_id: str | None = None
    user_name: str | None = None
    is_group: bool = False
    attachments: list[Attachment] = Field(default_factory=list)
    platform_message_id: str | None = None

    @property
    def origin(self) -> Origin:
        return Origin(surface=self.surface, chat_id=self.chat_id, thread_id=self.thread_id)

    @property
    def user_key(self) -> str:
        return f"{self.surface}:{self.user_id}"


class Button(Record):
    label: str
    action: str  # approve | deny | clarify | admit | ignore
    value: str  # approval id, "<clarify id>:<option index>", or a pairing code (admit, ignore)


class Outbound(Record):
    """A message for a surface to render: text, optional buttons, optionally an edit of an earlier one.
    With `attachment` (a file under the data directory) the text is its caption; an `audio/ogg` file
    goes out as a voice note where the platform has them."""

    origin: Origin
    text: str
    buttons: list[Button] = Field(default_factory=list)
    attachment: Attachment | None = None
    edit_of_outbox_id: int | None = None  # edit the platform message that outbox row produced
    reply_to_platform_id: str | None = None
    # Show the text exactly as written (an approval preview): no Markdown, links show their targets.
    # Each surface renders it its own way (Telegram <pre>, Slack plain_text).
    preformatted: bool = False
    partial: bool = False  # a streamed reply still growing (told only to surfaces that ask, see LiveSettings)


class SessionRecord(Record):
    id: str
    surface: str
    chat_id: str
    thread_id: str | None = None
    user_key: str
    kind: Literal["chat", "automation", "subagent"] = "chat"
    pinned_toolsets: list[str] | None = None
    last_selection: dict[str, Any] | None = None
    epoch: int = 0
    created_at: str
    updated_at: str

    @property
    def origin(self) -> Origin:
        return Origin(surface=self.surface, chat_id=self.chat_id, thread_id=self.thread_id)


class ToolCallRecord(Record):
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it


class MessageRecord(Record):
    id: int | None = None
    session_id: str
    epoch: int = 0
    turn_id: str
    role: Literal["user", "assistant", "tool", "event", "summary"]
    content: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    user_key: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=lambda: iso(utcnow()))


class TaskRecord(Record):
    id: int
    user_key: str
    title: str
    notes: str = ""
    due: str | None = None
    status: Literal["open", "done"] = "open"
    created_at: str
    updated_at: str


class MemoryEntry(Record):
    id: int
    user_key: str
    target: Literal["user", "notes"]
    content: str
    created_at: str


class AuditEvent(Record):
    id: int | None = None
    at: str = Field(default_factory=lambda: iso(utcnow()))
    actor: str
    action: str
    tool: str | None = None
    args_sha256: str | None = None
    subject: str | None = None
    session_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


OutboxState = Literal["pending", "sent", "failed"]


class OutboxItem(Record):
    id: int
    dedupe_key: str | None = None
    outbound: Outbound
    state: OutboxState = "pending"
    attempts: int = 0
    next_attempt_at: str | None = None
    platform_message_id: str | None = None
    error: str | None = None
    created_at: str
    sent_at: str | None = None
    revision: int = 0  # bumped by every rewrite of the row (`Outbox.put`)
    sending_at: str | None = None  # a send began and its outcome was never recorded

    @property
    def in_doubt(self) -> bool:
        """An earlier send of this row may have reached the platform (its process died mid-call), so a
        surface that can look its messages up should, before posting again."""
        return self.sending_at is not None


ApprovalState = Literal[
    "pending", "approved", "executing", "succeeded", "failed", "denied", "expired", "cancelled", "unknown"
]


class ApprovalRecord(Record):
    id: str
    session_id: str
    origin: Origin
    requester: str
    deciders: list[str]
    tool: str
    tool_call_id: str
    args_json: str
    args_sha256: str
    binding_sha256: str | None = None
    execution: str
    preview: str
    state: ApprovalState
    created_at: str
    expires_at: str
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str | None = None
    result: str | None = None
    prompt_refs: list[int] = Field(default_factory=list)  # outbox ids of the prompt messages
    turn_id: str | None = None  # with session_id and tool_call_id: the one call this approval is for
    payload_json: str | None = None  # canonical JSON of the exact effect the preview showed
    payload_sha256: str | None = None
    owner: str | None = None  # the process executing it (store.leases), and until when
    lease_until: str | None = None


class AutomationRecord(Record):
    id: str
    user_key: str
    origin: Origin
    name: str
    schedule: dict[str, Any]
    action: dict[str, Any]
    enabled: bool = True
    created_at: str
    updated_at: str
    last_run_at: str | None = None
    next_run_at: str | None = None


class AutomationRun(Record):
    id: int
    automation_id: str
    scheduled_for: str
    started_at: str
    finished_at: str | None = None
    status: Literal["claimed", "delivered", "failed"]
    late: bool = False
    output: str | None = None
    owner: str | None = None  # the process delivering it, and until when (store.leases)
    lease_until: str | None = None


class EmailDraftRecord(Record):
    id: str
    user_key: str
    message: dict[str, Any]
    state: Literal["draft", "sent"] = "draft"
    created_at: str
    updated_at: str


class ProcessRecord(Record):
    """A background process started by `bash(background=true)`, owned by the session that started it."""

    id: str
    session_id: str
    user_key: str
    command: str
    cwd: str
    pid: int | None = None
    state: Literal["running", "exited", "killed", "stopped", "timed_out", "lost"] = "running"
    exit_code: int | None = None
    log_path: str
    started_at: str
    finished_at: str | None = None
    owner: str | None = None  # the process supervising it (its Store's owner)


class ArtifactRecord(Record):
    """A file a session received (an attachment) or produced (speech), stored under the data directory."""

    id: str
    session_id: str
    user_key: str
    name: str
    type: str  # MIME type
    size: int
    path: str
    sha256: str
    pinned: bool = False
    origin: Literal["received", "produced"] = "received"
    source_key: str | None = None  # e.g. "<turn id>:<attachment index>": a re-run turn finds its own row
    meta: dict[str, Any] = Field(default_factory=dict)  # transcript, image size, ...
    created_at: str


class PairingRecord(Record):
    code: str
    surface: str
    user_id: str
    chat_id: str
    user_name: str | None = None
    created_at: str
    expires_at: str
    attempts: int = 0


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept (hashes are computed over this)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def row_to(model: type[BaseModel], row: dict[str, Any], json_fields: tuple[str, ...] = ()) -> Any:
    """Build a record from a row, decoding the JSON text columns named in `json_fields`."""
    data = dict(row)
    for f in json_fields:
        if isinstance(data.get(f), str):
            data[f] = json.loads(data[f])
        elif data.get(f) is None:
            data.pop(f, None)  # NULL column: the model's default (empty list / dict / None) applies
    return model.model_validate(data)


JobState = Literal["running", "succeeded", "failed", "cancelled", "interrupted"]


class SubagentJob(Record):
    """A child turn started by `delegate_task` (mode "sync") or `background_job` (mode "background")."""

    id: str
    parent_session_id: str
    child_session_id: str
    user_key: str
    origin: Origin
    task: str
    toolsets: list[str] = Field(default_factory=list)
    depth: int = 1
    mode: Literal["sync", "background"] = "sync"
    state: JobState = "running"
    summary: str | None = None
    owner_pid: int = 0
    owner: str = ""  # host/pid/start of the process running it (its Store's owner); "" on older rows
    lease_until: str | None = None  # renewed while it runs (store.leases.renew); None on older rows
    created_at: str
    finished_at: str | None = None
