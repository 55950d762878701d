"""The email toolset: search and read the owner's mail, write drafts, and send them after approval.

Sending is two steps on purpose. `email_draft` stores a complete message (recipients, subject, body,
threading headers and a Message-ID fixed now) and sends nothing. `email_send` waits for the owner's
Approve; its preview shows from, to, cc, bcc, subject and the whole body, and its payload is that whole
message. The approved effect sends exactly the payload, once: it claims the draft (draft -> sent) only
while the draft still holds that very message, before talking to the server, so a draft revised after
the prompt — even in the instant before the send — makes the approval send nothing.

Several mailboxes may be configured (`toolsets.accounts`): every tool takes an optional `account`, the
first being the default. A draft stores the account it was written in and is sent from that account;
the send preview names the account when there are several.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError

from connectors.mailerrors import EmailError
from connectors.oauth_token import SignInNeeded, TokenUnavailable
from store.drafts import Drafts
from store.records import EmailDraftRecord
from toolsets.accounts import AccountClients, accounts_of
from toolsets.base import ApprovalPolicy, ExecutionPolicy, Policy, Preview, Risk, ToolContext, ToolError, Toolset
from toolsets.flat_args import OptDate, OptInt, OptStr, OptStrs

# The client (aioimaplib, aiosmtplib) is the [email] service's, imported with it; composing and parsing
# (the standard library's email package, ~15 ms) are imported by the handlers that compose: registering
# the toolset loads neither.
if TYPE_CHECKING:
    from connectors.email import EmailClient
    from connectors.mailcompose import OutgoingMessage
    from connectors.mailparse import MailMessage

TOOLSET = Toolset(
    "email",
    "the owner's mailbox: search and read mail, draft new messages and replies, send (after approval)",
    keywords=(
        r"\be-?mails?\b", r"\be-?mail(?:ed|ing)\b", r"\bmail(?:s|box|ed|ing)?\b", r"\bgmail\b", r"\boutlook\b",
        r"\binbox\b", r"\bunread\b", r"\breply to\b", r"\bwrite to\b(?! (?:the |a )?(?:file|disk|log))",
        r"\b(?:has|have|did)\b[^.?!\n]{1,40}\b(?:replied|reply|write back|written back|answered|get back to me"
        r"|gotten back to me)\b",
        r"\b(?:sent|replied|answered)\b[^.?!\n]{0,40}\byet\b",
        r"(?<!can )\bforward(?:ed|ing)? (?:me |him |her |them |us )?(?:the|this|that|it|my|his|her|their)\b",
        r"\brespond to\b", r"\bdrafts?\b", r"\battachments?\b", r"\bnewsletters?\b", r"\bcc\b", r"\bsubject line\b",
        r"邮件", r"邮箱", r"电邮", r"回复", r"回信", r"收件箱", r"未读", r"草稿", r"发信", r"写信", r"附件", r"抄送",
    ),
    requires="email",
    owners_only=True,  # the owner's mailboxes (their accounts): never a guest's, whatever [access] guest_toolsets says
)

_READ: Policy = {"risk": Risk.READ, "execution": ExecutionPolicy.DIRECT}
_SEND: Policy = {"risk": Risk.RUNTIME_HIGH, "approval": ApprovalPolicy.ALWAYS,
                 "execution": ExecutionPolicy.CONFIRM}
Addresses = OptStrs


def _accounts(ctx: ToolContext) -> AccountClients[EmailClient]:
    return accounts_of(ctx, "email", "email")


async def _client(ctx: ToolContext, account: str | None) -> tuple[str, EmailClient]:
    """(name, client) of the mailbox `account` names (the first without one)."""
    with _errors(ctx):
        return await _accounts(ctx).pick(account)


def _told(ctx: ToolContext, exc: EmailError) -> str:
    """An email failure as the model reads it: one that quotes the mail server is outside content."""
    return ctx.external("mail server", str(exc)) if exc.remote else str(exc)


@contextmanager
def _errors(ctx: ToolContext) -> Iterator[None]:
    """Connector failures become tool results the model can read and act on."""
    try:
        yield
    except EmailError as exc:
        raise ToolError(_told(ctx, exc)) from None
    except (SignInNeeded, TokenUnavailable) as exc:
        raise ToolError(str(exc)) from None


def _invalid(exc: ValidationError) -> ToolError:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
        msg = err["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {msg}" if where else msg)
    return ToolError("; ".join(problems) + " (nothing was saved or sent)")


def _message(data: Any) -> OutgoingMessage:
    """A stored message (a draft's, an approval payload's) as the message it is. The stored form also
    names the account it is sent from (`_stored`); drafts from before accounts have none."""
    from connectors.mailcompose import OutgoingMessage

    return OutgoingMessage.model_validate({k: v for k, v in data.items() if k != "account"})


def _stored(message: OutgoingMessage, account: str) -> dict[str, Any]:
    """What a draft stores and an approval binds: the whole message and the account that sends it."""
    return {"account": account, **message.model_dump()}


def _draft_account(ctx: ToolContext, record: EmailDraftRecord, account: str | None) -> str:
    """The account a draft is sent from: the one it was written in (the first for an older draft);
    naming another is refused rather than silently ignored."""
    mine = _accounts(ctx).known(record.message.get("account"))
    if account and account.strip() and account.strip() != mine:
        raise ToolError(f"draft {record.id} was written in account {mine!r} and is sent from it; draft the message "
                        f"again in account {account.strip()!r} to send it from there")
    return mine


def _compose(**fields: Any) -> OutgoingMessage:
    from connectors.mailcompose import OutgoingMessage

    if not str(fields.get("subject") or "").strip():
        raise ToolError("the subject is empty; give the message a subject (nothing was saved or sent)")
    if not str(fields.get("body") or "").strip():
        raise ToolError("the body is empty; write the message text (nothing was saved or sent)")
    try:
        return OutgoingMessage(**fields)
    except ValidationError as exc:
        raise _invalid(exc) from None


async def _unsent(ctx: ToolContext, draft_id: str) -> EmailDraftRecord:
    record = await Drafts(ctx.store).get(ctx.user_key, draft_id)
    if record is None:
        raise ToolError(f"there is no draft {draft_id!r}; email_draft creates one and returns its id")
    if record.state == "sent":
        raise ToolError(f"draft {draft_id} was already sent; it will not be sent again (draft a new message)")
    return record


def _local(value: str, tz: tzinfo) -> str:
    """A message date in the owner's zone; one without a zone ("-0000") is taken as UTC."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return value
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(tz).strftime("%Y-%m-%d %H:%M")


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def _card(m: MailMessage, tz: tzinfo) -> str:
    head = [f"UID {m.uid} in {m.folder}" + (" (unread)" if m.unseen else ""), f"From: {m.sender}"]
    for label, value in (("Reply-To", m.reply_to), ("To", m.to), ("Cc", m.cc)):
        head += [f"{label}: {value}"] if value else []
    head += [f"Date: {_local(m.date, tz)}", f"Subject: {m.subject}", f"Message-ID: {m.message_id}"]
    head += [f"In-Reply-To: {m.in_reply_to}"] if m.in_reply_to else []
    if m.attachments:
        head.append("Attachments: " + ", ".join(f"{a.filename} ({a.content_type}, {_size(a.size)})"
                                                for a in m.attachments))
    return "\n".join(head) + "\n\n" + (m.text or "(no text)")


@TOOLSET.tool(**_READ)
async def email_status(ctx: ToolContext, account: OptStr = None) -> str:
    """List the mail accounts, whether their IMAP and SMTP servers accept our login, and INBOX counts.

    Args:
        account: Only this account; default all.
    """
    accounts = _accounts(ctx)
    names = [accounts.known(account)] if account else accounts.names

    async def one(name: str) -> list[str]:
        try:
            _, client = await accounts.pick(name)
            status = await client.status()
        except (SignInNeeded, TokenUnavailable) as exc:
            return [str(exc)]
        lines = [f"Mailbox {status.account}: IMAP {status.imap}; SMTP {status.smtp}."]
        if status.messages is not None:
            lines.append(f"INBOX: {status.messages} messages, {status.unseen} unread.")
        return lines

    found = await asyncio.gather(*(one(n) for n in names))
    if len(accounts) == 1:
        return "\n".join(found[0])
    return "\n".join(f"Account {accounts.label(n)}" + (" (the default)" if n == accounts.default else "") + ":\n  "
                     + "\n  ".join(lines) for n, lines in zip(names, found, strict=True))


@TOOLSET.tool(**_READ, visible_chars=5000)
async def email_search(
    ctx: ToolContext,
    sender: OptStr = None,
    to: OptStr = None,
    subject: OptStr = None,
    text: OptStr = None,
    since: OptDate = None,
    before: OptDate = None,
    unread_only: bool = False,
    folder: str = "INBOX",
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    account: OptStr = None,
) -> str:
    """Search mail (all criteria must match), newest first: uid, date, sender, subject, text start.

    Args:
        sender: Part of From.
        to: Part of To.
        text: Words in headers or body.
        since: On or after this date.
        before: Before this date.
        folder: A folder or Gmail label ("[Gmail]/All Mail", "[Gmail]/Sent Mail").
        account: Mail account (email_status lists them); default the first.
    """
    _, client = await _client(ctx, account)
    with _errors(ctx):
        found = await client.search(from_=sender, to=to, subject=subject, text=text, since=since,
                                    before=before, unseen=unread_only, folder=folder, limit=limit)
    if not found:
        return f"No messages in {folder} match."
    lines = []
    for m in found:
        lines.append(f"- uid {m.uid} | {_local(m.date, ctx.tz)} | {m.sender} | {m.subject}"
                     + (" | unread" if m.unseen else ""))
        lines += [f"  {m.snippet}"] if m.snippet else []
    # Senders, subjects and snippets are written by whoever sent the mail: outside content.
    return f"{len(found)} message(s) in {folder}, newest first:\n" + ctx.external(
        f"email search in {folder}", "\n".join(lines))


@TOOLSET.tool(**_READ, visible_chars=6000)
async def email_get(ctx: ToolContext, uid: int, folder: str = "INBOX", account: OptStr = None) -> str:
    """Read one message (headers, attachments, text); it stays unread.

    Args:
        uid: From email_search.
        account: As email_search.
    """
    _, client = await _client(ctx, account)
    with _errors(ctx):
        message = await client.get(uid, folder)
    return ctx.external(f"email uid {uid} in {folder}", _card(message, ctx.tz))


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def email_draft(
    ctx: ToolContext,
    to: Addresses = None,
    cc: Addresses = None,
    bcc: Addresses = None,
    subject: OptStr = None,
    body: OptStr = None,
    reply_to_uid: OptInt = None,
    folder: str = "INBOX",
    draft_id: OptStr = None,
    account: OptStr = None,
) -> str:
    """Save a draft, send nothing; returns its id (send with email_send). reply_to_uid threads a reply
    (subject "Re: ...", to its sender); draft_id revises a draft (only given fields change).

    Args:
        to: Addresses, "a@x.org" or "Ann <a@x.org>".
        body: Plain text.
        folder: Folder of reply_to_uid.
        account: The account it is sent from (and reply_to_uid's); default the first.
    """
    from connectors.mailcompose import new_message_id, reply_subject

    record = await _unsent(ctx, draft_id) if draft_id else None
    name, client = await _client(ctx, _draft_account(ctx, record, account) if record else account)
    base = _message(record.message) if record else None
    fields: dict[str, Any] = base.model_dump() if base else {
        "from_address": client.settings.from_address, "from_name": client.settings.from_name,
        "message_id": new_message_id(client.settings.from_address)}
    if reply_to_uid is not None:
        with _errors(ctx):
            original = await client.get(reply_to_uid, folder)
        # RFC 5322 3.6.4: the parent's References (or its In-Reply-To) followed by the parent's own id.
        thread = original.references or ([original.in_reply_to] if original.in_reply_to else [])
        references = list(dict.fromkeys([*thread, original.message_id])) if original.message_id else thread
        fields |= {"in_reply_to": original.message_id, "references": references,
                   "subject": reply_subject(original.subject), "to": [original.reply_to or original.sender]}
    given = {"to": to, "cc": cc, "bcc": bcc, "subject": subject, "body": body}
    fields |= {k: v for k, v in given.items() if v is not None}
    message = _compose(**fields)
    drafts = Drafts(ctx.store)
    if draft_id:
        record = await drafts.update(ctx.user_key, draft_id, _stored(message, name))
        if record is None:
            raise ToolError(f"draft {draft_id} was sent meanwhile; it can no longer change")
    else:
        record = await drafts.create(ctx.user_key, _stored(message, name))
    return (f"Draft {record.id} saved; nothing has been sent. To send it, call email_send with "
            f"draft_id=\"{record.id}\" (the owner approves first).\n\n{message.preview()}")


@TOOLSET.tool(**_SEND)
async def email_send(
    ctx: ToolContext,
    draft_id: OptStr = None,
    to: Addresses = None,
    cc: Addresses = None,
    bcc: Addresses = None,
    subject: OptStr = None,
    body: OptStr = None,
    account: OptStr = None,
) -> str:
    """Send, after the owner approves, a draft (draft_id) or a new message (to, subject, body; cc, bcc).

    Args:
        draft_id: From email_draft; or give the message fields instead.
        account: Sends a new message from this account (a draft goes from its own); default the first.
    """
    return await _send(ctx, None, await _send_payload(ctx, draft_id, to, cc, bcc, subject, body, account))


async def _send_payload(ctx: ToolContext, draft_id: str | None, to: Addresses, cc: Addresses, bcc: Addresses,
                        subject: str | None, body: str | None, account: str | None) -> dict[str, Any]:
    """The whole effect of an email_send call: the draft it sends (None for an inline message) and the
    complete message with the account it goes from, an inline one given its Message-ID now."""
    _accounts(ctx)  # without a mailbox, say so first
    if draft_id:
        if any(f is not None for f in (to, cc, bcc, subject, body)):
            raise ToolError("give either draft_id or the message fields (to, cc, bcc, subject, body), not both")
        record = await _unsent(ctx, draft_id)
        return {"draft_id": record.id, "account": _draft_account(ctx, record, account), "message": record.message}
    if not to and not cc and not bcc:
        raise ToolError("give draft_id, or a complete message: to, subject and body")
    from connectors.mailcompose import new_message_id

    name, client = await _client(ctx, account)
    message = _compose(message_id=new_message_id(client.settings.from_address),
                       from_address=client.settings.from_address, from_name=client.settings.from_name,
                       to=to or [], cc=cc or [], bcc=bcc or [], subject=subject, body=body)
    return {"draft_id": None, "account": name, "message": _stored(message, name)}


@email_send.effect
async def _send(ctx: ToolContext, args: Any, payload: dict[str, Any]) -> str:
    """Send the payload's message as it is, once, from the account it names."""
    _, client = await _client(ctx, payload.get("account"))  # approvals from before accounts name none
    drafts = Drafts(ctx.store)
    message = _message(payload["message"])
    draft_id = payload["draft_id"] or (await drafts.create(ctx.user_key, payload["message"])).id
    if not await drafts.claim(ctx.user_key, draft_id, payload["message"]):
        current = await drafts.get(ctx.user_key, draft_id)
        if current is not None and current.state == "draft":
            raise ToolError(f"draft {draft_id} changed after this send was approved; nothing was sent. "
                            "Ask the owner to approve the new version")
        raise ToolError(f"draft {draft_id} was already sent or is gone; it will not be sent again")
    try:
        result = await client.send(message.build(ctx.now()))
    except SignInNeeded as exc:  # raised before anything reached the server
        await drafts.unmark_sent(ctx.user_key, draft_id)
        raise ToolError(f"not sent: {exc} (draft {draft_id} is kept and can be sent once reconnected)") from None
    except TokenUnavailable as exc:  # likewise: no token, so the server was never given the message
        await drafts.unmark_sent(ctx.user_key, draft_id)
        raise ToolError(f"not sent: {exc} (draft {draft_id} is kept: send it again then)") from None
    except EmailError as exc:
        if exc.maybe_sent:
            raise ToolError(f"{_told(ctx, exc)} (draft {draft_id} is kept as sent so it cannot go out twice)") from None
        await drafts.unmark_sent(ctx.user_key, draft_id)
        raise ToolError(f"not sent: {_told(ctx, exc)} (draft {draft_id} is kept and can be sent once fixed)") from None
    lines = [f"Sent \"{message.subject}\" to {', '.join(result.accepted)} (draft {draft_id}, "
             f"Message-ID {result.message_id})."]
    lines += [f"Refused: {addr}: " + ctx.external("mail server", why) for addr, why in result.refused.items()]
    lines += [_sent_copy(ctx, result.sent_copy)] if result.sent_copy else []
    return "\n".join(lines)


def _sent_copy(ctx: ToolContext, sent_copy: str) -> str:
    """Where the sent copy went. Why it did not ("not saved to FOLDER: ...") quotes the IMAP server's
    refusal: outside content, shown in its block, and it taints the conversation like any other read."""
    folder, colon, why = sent_copy.partition(": ")
    if not (sent_copy.startswith("not saved to ") and colon):
        return f"Copy {sent_copy}."
    return f"Copy {folder}: " + ctx.external("mail server", why)


@email_send.preview
async def _preview_send(ctx: ToolContext, args: Any) -> Preview:
    payload = await _send_payload(ctx, args.draft_id, args.to, args.cc, args.bcc, args.subject, args.body,
                                  args.account)
    label = f" (draft {payload['draft_id']})" if payload["draft_id"] else ""
    accounts = _accounts(ctx)
    if len(accounts) > 1:
        label += f" from account {accounts.label(payload['account'])}"
    message = _message(payload["message"])
    return Preview(text=f"Send this email{label}:\n\n{message.preview()}", payload=payload)
