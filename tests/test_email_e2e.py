"""Issue 8: sending email through the approval flow, end to end in the console.

The real Gateway and console surface, the fake model, and the session's real mail servers (pymap for
IMAP, aiosmtpd for SMTP). What counts is what arrives at the SMTP server, the approval's state, the
draft's state and what the owner reads on the console.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from gateway import checkpoints
from store.approvals import Approvals
from store.drafts import Drafts
from tests.fixtures.mail import USER, MailServers, SmtpRecorder
from tests.fixtures.model import reply, tool_call

OWNER = "console:owner"
BODY = "Hi Anna,\n\nthe numbers for Q1 are attached in spirit.\nSee you Monday.\n\nOwner"
MESSAGE = {"to": ["Anna Berg <anna@example.net>"], "cc": ["carol@example.com"], "bcc": ["audit@example.org"],
           "subject": "Q1 numbers", "body": BODY}


@pytest.fixture
async def mailer(start_console, email_config):
    return await start_console(email_config())


async def draft(harness, model, **args: Any) -> str:
    """Have the model write a draft in one turn; returns the draft id. Nothing reaches SMTP."""
    model.script(tool_call("email_draft", args), reply("Drafted."))
    out = await harness.say("email: draft it please")
    assert "Drafted." in out
    rows = await harness.gw.store.run(lambda db: list(db["email_drafts"].rows_where(order_by="created_at")))
    return rows[-1]["id"]


async def ask_to_send(harness, model, draft_id: str) -> tuple[str, str]:
    """Have the model call email_send on the draft; returns (approval id, the console output)."""
    model.script(tool_call("email_send", {"draft_id": draft_id}), reply("Waiting for your approval."))
    out = await harness.say("email: send it")
    assert "🔐 Approval needed: email_send" in out and "Waiting for your approval." in out
    found = re.search(r"/approve (\S+)", out)
    assert found, out
    rec = await Approvals(harness.gw.store).get(found.group(1))
    assert rec is not None and rec.state == "pending" and rec.tool == "email_send"
    return found.group(1), out


async def held(harness, model, **args: Any) -> tuple[str, str, str]:
    """Draft, then ask to send: (draft id, approval id, prompt output)."""
    draft_id = await draft(harness, model, **(args or MESSAGE))
    approval_id, out = await ask_to_send(harness, model, draft_id)
    return draft_id, approval_id, out


async def state(harness, approval_id: str) -> str:
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None
    return rec.state


async def draft_state(harness, draft_id: str) -> str:
    rec = await Drafts(harness.gw.store).get(OWNER, draft_id)
    assert rec is not None
    return rec.state


def body_of(received) -> str:
    return received.message.get_content().replace("\r\n", "\n")


async def test_one_approval_sends_exactly_the_previewed_message_once(mailer, model, smtp_recorder: SmtpRecorder):
    draft_id, approval_id, prompt = await held(mailer, model)
    # The prompt shows the whole message as it would go out, and nothing has gone out yet.
    assert (f"Send this email (draft {draft_id}):\n\nFrom: Owner Example <owner@example.test>\n"
            "To: Anna Berg <anna@example.net>\nCc: carol@example.com\nBcc: audit@example.org\n"
            f"Subject: Q1 numbers\n\n{BODY}") in prompt
    assert smtp_recorder.received == []

    out = await mailer.say(f"/approve {approval_id}")
    assert "Approved; running it now." in out and "✅ Approved — done by console:owner: email_send" in out
    (got,) = smtp_recorder.received
    assert got.mail_from == USER
    assert got.rcpt_tos == ["anna@example.net", "carol@example.com", "audit@example.org"]
    m = got.message
    assert (m["From"], m["To"], m["Cc"], m["Bcc"], m["Subject"]) == (
        "Owner Example <owner@example.test>", "Anna Berg <anna@example.net>", "carol@example.com", None, "Q1 numbers")
    assert body_of(got) == BODY + "\n"
    stored = await Drafts(mailer.gw.store).get(OWNER, draft_id)
    assert stored is not None and m["Message-ID"] == stored.message["message_id"]
    assert await state(mailer, approval_id) == "succeeded" and stored.state == "sent"
    # The outcome entered the session and the model took its one follow-up turn.
    assert f"echo: [event] Approval {approval_id} for email_send was approved by console:owner and has run. " \
           "Result: Sent \"Q1 numbers\" to anna@example.net" in out


async def test_double_approve_still_sends_once(mailer, model, smtp_recorder: SmtpRecorder):
    _, approval_id, _ = await held(mailer, model)
    first = await mailer.say(f"/approve {approval_id}")
    second = await mailer.say(f"/approve {approval_id}")
    assert "Approved; running it now." in first
    assert "Already succeeded; nothing changed." in second
    # A second device and replayed callbacks, all at once.
    answers = await asyncio.gather(*[mailer.gw.approvals.decide(approval_id, OWNER, True) for _ in range(4)])
    await mailer.gw.idle()
    assert set(answers) == {"Already succeeded; nothing changed."}
    assert len(smtp_recorder.received) == 1 and await state(mailer, approval_id) == "succeeded"


async def test_concurrent_approvals_send_once(mailer, model, smtp_recorder: SmtpRecorder):
    _, approval_id, _ = await held(mailer, model)
    answers = await asyncio.gather(*[mailer.gw.approvals.decide(approval_id, OWNER, True) for _ in range(5)])
    await mailer.gw.idle()
    assert answers.count("Approved; running it now.") == 1
    assert len(smtp_recorder.received) == 1 and await state(mailer, approval_id) == "succeeded"


async def test_deny_sends_nothing(mailer, model, smtp_recorder: SmtpRecorder):
    draft_id, approval_id, _ = await held(mailer, model)
    out = await mailer.say(f"/deny {approval_id} wrong numbers")
    assert "Denied." in out and "🚫 Denied by console:owner: email_send" in out and "Reason: wrong numbers" in out
    assert "Already denied; nothing changed." in await mailer.say(f"/approve {approval_id}")
    assert smtp_recorder.received == []
    assert await state(mailer, approval_id) == "denied" and await draft_state(mailer, draft_id) == "draft"


async def test_smtp_down_at_approval_fails_and_tells_the_owner(start_console, email_config, mail_servers, model,
                                                               smtp_recorder: SmtpRecorder):
    harness = await start_console(email_config(smtp_port=mail_servers.closed_port))
    draft_id, approval_id, _ = await held(harness, model)
    out = await harness.say(f"/approve {approval_id}")
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed"
    assert rec.result is not None and "not sent" in rec.result and "unreachable" in rec.result
    assert f"SMTP server 127.0.0.1:{mail_servers.closed_port}" in rec.result
    assert "❌ Approved — failed by console:owner: email_send" in out and rec.result in out
    assert smtp_recorder.received == []
    # The draft stays a draft: fixable and sendable after a new approval.
    assert await draft_state(harness, draft_id) == "draft"


async def test_smtp_refusal_at_approval_fails_with_the_servers_reason(mailer, model, smtp_recorder: SmtpRecorder):
    draft_id, approval_id, _ = await held(mailer, model)
    smtp_recorder.refusal = "550 5.1.1 mailbox unavailable: no such user here"
    out = await mailer.say(f"/approve {approval_id}")
    rec = await Approvals(mailer.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed" and rec.result is not None
    assert "no such user here" in rec.result and "not sent" in rec.result
    assert "❌ Approved — failed" in out and "no such user here" in out
    assert f"Approval {approval_id} for email_send was approved by console:owner but failed" in out
    assert smtp_recorder.received == [] and await draft_state(mailer, draft_id) == "draft"

    # Once the server accepts again, a new approval of the same draft sends it, once.
    smtp_recorder.refusal = None
    again, _ = await ask_to_send(mailer, model, draft_id)
    await mailer.say(f"/approve {again}")
    assert len(smtp_recorder.received) == 1 and await draft_state(mailer, draft_id) == "sent"


async def test_restart_between_draft_and_approval_still_sends_once(start_console, email_config, model,
                                                                   smtp_recorder: SmtpRecorder):
    cfg = email_config()
    first = await start_console(cfg)
    draft_id, approval_id, _ = await held(first, model)
    await first.gw.stop()
    assert smtp_recorder.received == []

    second = await start_console(cfg)
    out = await second.say(f"/approve {approval_id}")
    assert "✅ Approved — done" in out
    (got,) = smtp_recorder.received
    assert got.message["Subject"] == "Q1 numbers" and body_of(got) == BODY + "\n"
    assert await state(second, approval_id) == "succeeded" and await draft_state(second, draft_id) == "sent"
    await second.say(f"/approve {approval_id}")
    assert len(smtp_recorder.received) == 1


async def test_a_reply_arrives_threaded(mailer, model, mail_servers: MailServers, smtp_recorder: SmtpRecorder):
    _, approval_id, prompt = await held(mailer, model, reply_to_uid=mail_servers.uids["thread_reply"],
                                        body="Monday it is.")
    assert "To: Project list <project@example.org>\nSubject: Re: Project kickoff\n\nMonday it is." in prompt
    await mailer.say(f"/approve {approval_id}")
    (got,) = smtp_recorder.received
    m = got.message
    assert got.rcpt_tos == ["project@example.org"]  # the original's Reply-To, not its From
    assert (m["Subject"], m["In-Reply-To"], m["References"]) == (
        "Re: Project kickoff", "<kickoff-2@example.org>", "<kickoff-1@example.org> <kickoff-2@example.org>")
    assert body_of(got) == "Monday it is.\n"


async def test_a_draft_edited_after_the_prompt_is_not_sent_by_that_approval(mailer, model,
                                                                             smtp_recorder: SmtpRecorder):
    draft_id, approval_id, _ = await held(mailer, model)
    model.script(tool_call("email_draft", {"draft_id": draft_id, "to": ["mallory@example.net"],
                                           "body": "Different text."}), reply("Revised."))
    assert "Revised." in await mailer.say("email: change the draft")
    out = await mailer.say(f"/approve {approval_id}")
    rec = await Approvals(mailer.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed" and rec.result is not None
    assert "changed after this send was approved; nothing was sent" in rec.result
    assert "❌ Approved — failed" in out and "nothing was sent" in out
    assert smtp_recorder.received == [] and await draft_state(mailer, draft_id) == "draft"

    # A fresh prompt shows the revised message; approving that one sends the revision.
    again, prompt = await ask_to_send(mailer, model, draft_id)
    assert "To: mallory@example.net" in prompt and "Different text." in prompt
    await mailer.say(f"/approve {again}")
    (got,) = smtp_recorder.received
    assert got.rcpt_tos == ["mallory@example.net", "carol@example.com", "audit@example.org"]
    assert body_of(got) == "Different text.\n"


async def test_a_draft_revised_between_the_claim_and_the_send_goes_out_as_approved_or_not_at_all(
        mailer, model, smtp_recorder: SmtpRecorder):
    """The forced interleaving of issue 13 item 3: the draft is rewritten at the instant the approved
    call starts executing (after its claim, before the effect), the way a concurrent turn could."""
    draft_id, approval_id, _ = await held(mailer, model)

    async def revise() -> None:
        assert await Drafts(mailer.gw.store).update(OWNER, draft_id, {
            **(await Drafts(mailer.gw.store).get(OWNER, draft_id)).message,
            "to": ["mallory@evil.example"], "body": "Wire 5000 EUR"}) is not None

    with checkpoints.intercept("approval.claimed", revise):
        await mailer.say(f"/approve {approval_id}")
    assert smtp_recorder.received == []  # the approved text no longer exists: nothing went out
    rec = await Approvals(mailer.gw.store).get(approval_id)
    assert rec is not None and rec.state == "failed" and "nothing was sent" in (rec.result or "")

    assert await draft_state(mailer, draft_id) == "draft"  # the revision is kept, unsent, for a new approval


async def test_asking_to_send_a_sent_draft_again_is_refused_without_a_prompt(mailer, model,
                                                                           smtp_recorder: SmtpRecorder):
    draft_id, approval_id, _ = await held(mailer, model)
    await mailer.say(f"/approve {approval_id}")
    assert len(smtp_recorder.received) == 1
    # The model forgets it was sent and asks again: the preview refuses, the turn goes on, no prompt.
    model.script(tool_call("email_send", {"draft_id": draft_id}), reply("It was already sent."))
    out = await mailer.say("email: send it again")
    assert "It was already sent." in out and "Approval needed" not in out
    result = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"][-1]
    assert result.startswith(f"Error: draft {draft_id} was already sent")
    assert await Approvals(mailer.gw.store).list(("pending",)) == []
    assert len(smtp_recorder.received) == 1
