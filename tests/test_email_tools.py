"""The email toolset's handlers and send preview, through a RecordingContext, against the real test servers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from connectors.email import EmailClient
from store.db import Store
from store.drafts import Drafts
from store.records import dumps
from tests.fixtures.mail import MailServers, SmtpRecorder
from tests.support.context import RecordingContext
from toolsets.base import ApprovalPolicy, ExecutionPolicy, Preview, Risk, Tool, ToolError
from toolsets.email import TOOLSET, email_draft, email_get, email_search, email_send, email_status

LONG_BODY = "Hi Bob,\n\n" + "\n".join(f"Line {i}: the whole body is shown, not a teaser." for i in range(40))


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    """As the runtime does: validate the arguments with the tool's model, then call the handler."""
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def preview(ctx: RecordingContext, **args: Any) -> Preview:
    assert email_send.previewer is not None
    return await email_send.previewer(ctx, email_send.args_model.model_validate(args))


def payload_hash(p: Preview) -> str:
    return hashlib.sha256(dumps(p.payload).encode()).hexdigest()


def draft_id_of(result: str) -> str:
    found = re.search(r"Draft (\w+) saved", result)
    assert found, result
    return found.group(1)


async def state_of(ctx: RecordingContext, draft_id: str) -> str:
    draft = await Drafts(ctx.store).get(ctx.user_key, draft_id)
    assert draft is not None
    return draft.state


@asynccontextmanager
async def context_for(store: Store, servers: MailServers, **overrides: Any) -> AsyncIterator[RecordingContext]:
    """A context whose "email" service is a client of the test servers (settings overridable)."""
    async with EmailClient(servers.settings(**overrides), tls_context=servers.client_tls) as client:
        yield RecordingContext(store=store, services={"email": client})


@pytest_asyncio.fixture(loop_scope="function")
async def ctx(store: Store, mail_servers: MailServers) -> AsyncIterator[RecordingContext]:
    async with context_for(store, mail_servers) as c:
        yield c


@pytest_asyncio.fixture(loop_scope="function")
async def ctx_imap_down(store: Store, mail_servers: MailServers) -> AsyncIterator[RecordingContext]:
    async with context_for(store, mail_servers, imap_port=mail_servers.closed_port) as c:
        yield c


@pytest_asyncio.fixture(loop_scope="function")
async def ctx_smtp_down(store: Store, mail_servers: MailServers) -> AsyncIterator[RecordingContext]:
    async with context_for(store, mail_servers, smtp_port=mail_servers.closed_port) as c:
        yield c


def test_toolset_declares_tools_policies_and_keywords() -> None:
    tools = {t.name: t for t in TOOLSET.tools}
    assert list(tools) == ["email_status", "email_search", "email_get", "email_draft", "email_send"]
    assert TOOLSET.requires == "email"
    for name in ("email_status", "email_search", "email_get"):
        assert (tools[name].descriptor.risk, tools[name].descriptor.execution) == (Risk.READ, ExecutionPolicy.DIRECT)
    assert tools["email_get"].descriptor.output_budget.visible_chars == 6000
    draft = tools["email_draft"].descriptor
    assert (draft.risk, draft.approval, draft.execution) == (Risk.RUNTIME_LOW, ApprovalPolicy.NONE,
                                                             ExecutionPolicy.AUDIT)
    send = tools["email_send"].descriptor
    assert (send.risk, send.approval, send.execution) == (Risk.RUNTIME_HIGH, ApprovalPolicy.ALWAYS,
                                                          ExecutionPolicy.CONFIRM)
    assert tools["email_send"].previewer is not None
    limit = tools["email_search"].schema()["parameters"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 50, 10)
    for text in ("check my inbox", "any new email from Bob?", "please reply to Dave", "帮我回复这封邮件", "看看邮箱"):
        assert any(re.search(k, text, re.IGNORECASE) for k in TOOLSET.keywords), text
    assert not any(re.search(k, "what's the weather tomorrow", re.IGNORECASE) for k in TOOLSET.keywords)


async def test_without_a_configured_mailbox_every_tool_says_so(store: Store) -> None:
    bare = RecordingContext(store=store)
    for tool, args in ((email_status, {}), (email_search, {}), (email_get, {"uid": 1}),
                       (email_draft, {"to": ["bob@example.net"], "subject": "s", "body": "b"}),
                       (email_send, {"draft_id": "d1"})):
        with pytest.raises(ToolError, match="email is not configured"):
            await call(tool, bare, **args)


async def test_status_search_and_get(ctx: RecordingContext, mail_servers: MailServers) -> None:
    status = await call(email_status, ctx)
    assert status == "Mailbox owner@example.test: IMAP ok; SMTP ok.\nINBOX: 7 messages, 4 unread."
    uid = mail_servers.uids["attachment"]
    found = await call(email_search, ctx, subject="invoice", since="2024-03-01")
    assert found.startswith("1 message(s) in INBOX, newest first:\n<untrusted source=\"email search in INBOX\"")
    assert ctx.unwrap(found) == (f"- uid {uid} | 2024-03-05 09:30 | "
                                 "Carol <carol@example.com> | Invoice 42 | unread\n  Please find the invoice attached.")
    wrapped = await call(email_get, ctx, uid=uid)
    assert wrapped.startswith(f'<untrusted source="email uid {uid} in INBOX"')
    assert ctx.external_sources == ["email search in INBOX", f"email uid {uid} in INBOX"]
    card = ctx.unwrap(wrapped)
    assert "Attachments: invoice-42.pdf (application/pdf, 2.0 KB), résumé.txt (text/plain, 11 B)" in card
    assert card.startswith(f"UID {uid} in INBOX (unread)\nFrom: Carol <carol@example.com>")
    assert card.endswith("\n\nPlease find the invoice attached.")
    assert await call(email_search, ctx, sender="nobody@nowhere.example") == "No messages in INBOX match."


async def test_search_and_get_bad_input_and_imap_down(ctx: RecordingContext, ctx_imap_down: RecordingContext) -> None:
    with pytest.raises(ToolError, match="cannot open folder 'Archive/2019'"):
        await call(email_search, ctx, folder="Archive/2019")
    with pytest.raises(ToolError, match="no message with UID 424242"):
        await call(email_get, ctx, uid=424242)
    with pytest.raises(ToolError, match=r"IMAP server 127\.0\.0\.1:\d+ is unreachable: connection refused"):
        await call(email_search, ctx_imap_down, subject="x")
    down = await call(email_status, ctx_imap_down)
    assert "IMAP IMAP server 127.0.0.1" in down and "unreachable" in down and "SMTP ok" in down


@pytest.mark.parametrize(("args", "error"), [
    ({"to": ["bob@"]}, "to: not a valid email address: 'bob@'"),
    ({"to": ["bob@example.net"], "cc": ["carol at example.com"]}, "cc: not a valid email address"),
    ({"to": ["bob@example.net"], "bcc": ["Bob <bob@example>"]}, "bcc: not a valid email address"),
    ({"to": []}, "no recipients"),
    ({"to": ["bob@example.net"], "subject": "  "}, "the subject is empty"),
])
async def test_draft_refuses_malformed_messages(ctx: RecordingContext, args: dict[str, Any], error: str) -> None:
    with pytest.raises(ToolError, match=re.escape(error)):
        await call(email_draft, ctx, **{"subject": "Hello", "body": "Hi", **args})
    assert await ctx.store.run(lambda db: db["email_drafts"].count) == 0


async def test_draft_stores_a_complete_message_and_sends_nothing(ctx: RecordingContext,
                                                                 smtp_recorder: SmtpRecorder) -> None:
    result = await call(email_draft, ctx, to=["Bob <bob@example.net>"], subject="Lunch?", body="Noon?")
    draft = await Drafts(ctx.store).get(ctx.user_key, draft_id_of(result))
    assert draft is not None and draft.state == "draft"
    assert re.fullmatch(r"<[^@<>]+@example\.test>", draft.message["message_id"])
    assert result.endswith("From: Owner Example <owner@example.test>\nTo: Bob <bob@example.net>\n"
                           "Subject: Lunch?\n\nNoon?")
    assert smtp_recorder.received == []


async def test_reply_threads_and_is_sent_with_those_headers(ctx: RecordingContext, mail_servers: MailServers,
                                                            smtp_recorder: SmtpRecorder) -> None:
    result = await call(email_draft, ctx, reply_to_uid=mail_servers.uids["thread_reply"], body="Monday it is.")
    draft = await Drafts(ctx.store).get(ctx.user_key, draft_id_of(result))
    assert draft is not None
    assert draft.message["subject"] == "Re: Project kickoff"  # not "Re: Re: ..."
    assert draft.message["to"] == ["Project list <project@example.org>"]  # the Reply-To wins over From
    assert draft.message["in_reply_to"] == "<kickoff-2@example.org>"
    assert draft.message["references"] == ["<kickoff-1@example.org>", "<kickoff-2@example.org>"]
    await call(email_send, ctx, draft_id=draft.id)
    sent = smtp_recorder.received[0].message
    assert (sent["Subject"], sent["In-Reply-To"], sent["References"]) == (
        "Re: Project kickoff", "<kickoff-2@example.org>", "<kickoff-1@example.org> <kickoff-2@example.org>")

    first = await call(email_draft, ctx, reply_to_uid=mail_servers.uids["thread_start"], body="Yes.")
    start = await Drafts(ctx.store).get(ctx.user_key, draft_id_of(first))
    assert start is not None
    assert (start.message["subject"], start.message["to"], start.message["references"]) == (
        "Re: Project kickoff", ["Dave <dave@example.org>"], ["<kickoff-1@example.org>"])


async def test_send_delivers_exactly_the_stored_draft_once(ctx: RecordingContext,
                                                           smtp_recorder: SmtpRecorder) -> None:
    result = await call(email_draft, ctx, to=["Bob <bob@example.net>"], cc=["carol@example.com"],
                        bcc=["audit@example.org"], subject="Numbers for Q1", body=LONG_BODY)
    draft_id = draft_id_of(result)
    stored = await Drafts(ctx.store).get(ctx.user_key, draft_id)
    assert stored is not None
    shown = await preview(ctx, draft_id=draft_id)
    assert shown.text == (f"Send this email (draft {draft_id}):\n\nFrom: Owner Example <owner@example.test>\n"
                          "To: Bob <bob@example.net>\nCc: carol@example.com\nBcc: audit@example.org\n"
                          f"Subject: Numbers for Q1\n\n{LONG_BODY}")
    assert shown.payload == {"draft_id": draft_id, "account": "default", "message": stored.message}

    outcome = await call(email_send, ctx, draft_id=draft_id)
    assert stored.message["message_id"] in outcome and outcome.startswith('Sent "Numbers for Q1" to bob@example.net')
    (got,) = smtp_recorder.received
    assert got.rcpt_tos == ["bob@example.net", "carol@example.com", "audit@example.org"]
    m = got.message
    assert (m["Message-ID"], m["Subject"], m["To"], m["Cc"], m["Bcc"]) == (
        stored.message["message_id"], "Numbers for Q1", "Bob <bob@example.net>", "carol@example.com", None)
    assert m.get_content().replace("\r\n", "\n") == LONG_BODY + "\n"
    assert await state_of(ctx, draft_id) == "sent"

    with pytest.raises(ToolError, match="already sent"):
        await call(email_send, ctx, draft_id=draft_id)
    with pytest.raises(ToolError, match="already sent"):
        await preview(ctx, draft_id=draft_id)
    with pytest.raises(ToolError, match="already sent"):
        await call(email_draft, ctx, draft_id=draft_id, body="too late")
    assert len(smtp_recorder.received) == 1


async def test_smtp_refusal_is_a_tool_error_and_the_draft_stays_sendable(ctx: RecordingContext,
                                                                          smtp_recorder: SmtpRecorder) -> None:
    draft_id = draft_id_of(await call(email_draft, ctx, to=["ghost@example.net"], subject="Hi", body="Hello"))
    smtp_recorder.refusal = "550 5.1.1 <ghost@example.net>: Recipient address rejected: User unknown"
    with pytest.raises(ToolError,
                       match=r"(?s)not sent: .*550 5\.1\.1 <ghost@example\.net>: Recipient address rejected"):
        await call(email_send, ctx, draft_id=draft_id)
    assert ctx.external_sources[-1] == "mail server"  # the server's reply text is outside content
    assert smtp_recorder.received == []
    assert await state_of(ctx, draft_id) == "draft"
    smtp_recorder.refusal = None
    await call(email_send, ctx, draft_id=draft_id)
    assert len(smtp_recorder.received) == 1


async def test_smtp_down_is_a_clear_tool_error(ctx_smtp_down: RecordingContext, smtp_recorder: SmtpRecorder) -> None:
    draft_id = draft_id_of(await call(email_draft, ctx_smtp_down, to=["bob@example.net"], subject="Hi", body="Yo"))
    with pytest.raises(ToolError, match=r"not sent: SMTP server 127\.0\.0\.1:\d+ is unreachable: connection refused"):
        await call(email_send, ctx_smtp_down, draft_id=draft_id)
    assert await state_of(ctx_smtp_down, draft_id) == "draft"
    assert smtp_recorder.received == []


async def test_editing_a_draft_changes_the_preview_payload(ctx: RecordingContext) -> None:
    draft_id = draft_id_of(await call(email_draft, ctx, to=["bob@example.net"], subject="Plan", body="Version 1"))
    before = await preview(ctx, draft_id=draft_id)
    assert payload_hash(await preview(ctx, draft_id=draft_id)) == payload_hash(before)  # stable while unchanged
    revised = await call(email_draft, ctx, draft_id=draft_id, body="Version 2")
    assert draft_id_of(revised) == draft_id and "Subject: Plan\n\nVersion 2" in revised
    after = await preview(ctx, draft_id=draft_id)
    assert payload_hash(after) != payload_hash(before) and "Version 2" in after.text
    assert after.payload["message"]["message_id"] == before.payload["message"]["message_id"]


async def test_the_effect_sends_the_approved_payload_or_nothing(ctx: RecordingContext,
                                                                 smtp_recorder: SmtpRecorder) -> None:
    assert email_send.effector is not None
    draft_id = draft_id_of(await call(email_draft, ctx, to=["anna@example.net"], subject="Lunch",
                                      body="See you at 12"))
    approved = (await preview(ctx, draft_id=draft_id)).payload
    await call(email_draft, ctx, draft_id=draft_id, to=["mallory@evil.example"], body="Wire 5000 EUR")
    with pytest.raises(ToolError, match="changed after this send was approved; nothing was sent"):
        await email_send.effector(ctx, email_send.args_model.model_validate({"draft_id": draft_id}), approved)
    assert smtp_recorder.received == [] and await state_of(ctx, draft_id) == "draft"
    inline = (await preview(ctx, to=["anna@example.net"], subject="Lunch", body="See you at 12")).payload
    await email_send.effector(ctx, email_send.args_model.model_validate({}), inline)
    (got,) = smtp_recorder.received
    assert (got.rcpt_tos, got.message["Message-ID"]) == (["anna@example.net"], inline["message"]["message_id"])


async def test_inline_send_stores_a_draft_then_sends_it(ctx: RecordingContext, smtp_recorder: SmtpRecorder) -> None:
    args = {"to": ["bob@example.net"], "subject": "Quick note", "body": "See you at 5."}
    shown = await preview(ctx, **args)
    assert shown.text.endswith("To: bob@example.net\nSubject: Quick note\n\nSee you at 5.")
    assert shown.payload["draft_id"] is None and shown.payload["message"]["body"] == "See you at 5."
    await call(email_send, ctx, **args)
    (got,) = smtp_recorder.received
    rows = await ctx.store.run(lambda db: list(db["email_drafts"].rows))
    assert [(r["state"], got.message["Message-ID"] in r["message"]) for r in rows] == [("sent", True)]
    with pytest.raises(ToolError, match="either draft_id or the message fields"):
        await call(email_send, ctx, draft_id=rows[0]["id"], body="other")
    with pytest.raises(ToolError, match="give draft_id, or a complete message"):
        await call(email_send, ctx, subject="no recipients", body="x")
    with pytest.raises(ToolError, match="not a valid email address"):
        await preview(ctx, to=["bob@"], subject="s", body="b")
