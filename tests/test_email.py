"""The email connector against real servers (pymap IMAP, aiosmtpd SMTP), message composing, and drafts."""

from __future__ import annotations

import logging
import re
import ssl
from datetime import UTC, date, datetime
from email.utils import make_msgid

import pytest

from connectors.email import EmailClient, EmailError, EmailSettings
from connectors.mailcompose import OutgoingMessage, parse_addresses, reply_subject
from store.db import Store
from store.drafts import Drafts
from tests.fixtures.mail import PASSWORD, SMTP_PASSWORD, SMTP_USER, MailServers, SmtpRecorder
from tests.support.mailbox import ATTACHMENT_BYTES, SEED, SENT_FOLDER


def client_for(servers: MailServers, **overrides: object) -> EmailClient:
    return EmailClient(servers.settings(**overrides), tls_context=servers.client_tls)


# --- reading -------------------------------------------------------------------------------------------

async def test_status_reports_both_servers_and_inbox_counts(email_settings: EmailSettings) -> None:
    async with EmailClient(email_settings) as client:  # plain IMAP and SMTP: no TLS context needed
        status = await client.status()
    assert status.reachable, status
    assert (status.messages, status.unseen) == (len(SEED), sum(not s.seen for s in SEED))


async def test_search_lists_everything_newest_first_with_readable_snippets(mail_servers: MailServers) -> None:
    async with client_for(mail_servers) as client:
        found = await client.search()
    uids = mail_servers.uids
    assert [m.uid for m in found] == sorted(uids.values(), reverse=True)
    by_uid = {m.uid: m for m in found}
    latin1 = by_uid[uids["latin1"]]
    assert (latin1.subject, latin1.sender) == ("Café crème à Zürich", "François <francois@example.fr>")
    assert latin1.snippet == "Ça coûte très cher à Zürich, même le café."
    assert by_uid[uids["html_only"]].snippet.startswith("Spring edition Fish & chips are back on the menu.")
    assert by_uid[uids["html_only"]].unseen and not by_uid[uids["utf8"]].unseen
    assert by_uid[uids["utf8"]].date == "2024-03-01T09:30:00+00:00"


async def test_search_criteria_combine(mail_servers: MailServers) -> None:
    uids = mail_servers.uids
    async with client_for(mail_servers) as client:
        assert [m.uid for m in await client.search(subject="Zürich")] == [uids["latin1"]]  # UTF-8 criterion
        assert [m.uid for m in await client.search(from_="bob@example.net")] == [uids["alternative"]]
        assert [m.uid for m in await client.search(text="noodle")] == [uids["alternative"]]
        assert {m.uid for m in await client.search(unseen=True)} == {uids[s.key] for s in SEED if not s.seen}
        window = await client.search(since=date(2024, 3, 3), before=date(2024, 3, 5))
        assert [m.uid for m in window] == [uids["latin1"], uids["html_only"]]
        assert [m.uid for m in await client.search(subject="kickoff", unseen=True)] == [uids["thread_reply"]]
        assert [m.uid for m in await client.search(limit=2)] == [uids["thread_reply"], uids["thread_start"]]
        assert await client.search(subject="no such subject anywhere") == []


async def test_get_decodes_quoted_printable_base64_and_non_utf8(mail_servers: MailServers) -> None:
    uids = mail_servers.uids
    async with client_for(mail_servers) as client:
        utf8 = await client.get(uids["utf8"])
        latin1 = await client.get(uids["latin1"])
        reply = await client.get(uids["thread_reply"])
    assert utf8.subject == "Quarterly report — Grüße"
    assert "Grüße aus Köln, 你好!" in utf8.text
    assert latin1.text == "Ça coûte très cher à Zürich, même le café."
    assert latin1.message_id == "<latin-1@example.fr>"
    assert reply.text == "Monday works for me. 会议纪要 follow."
    assert (reply.in_reply_to, reply.references) == ("<kickoff-1@example.org>", ["<kickoff-1@example.org>"])
    assert reply.reply_to == "Project list <project@example.org>"


async def test_get_turns_html_only_mail_into_readable_text(mail_servers: MailServers) -> None:
    async with client_for(mail_servers) as client:
        news = await client.get(mail_servers.uids["html_only"])
    assert news.text == (
        "Spring edition\n\nFish & chips are back on the menu.\n\n- Tuesday: tacos\n- Thursday: curry\n\n"
        "Day | Dish\nMonday | Lentil soup\n\n"
        "Read the full story (https://news.example.com/spring).\nThanks!")


async def test_get_prefers_the_plain_part_and_lists_attachments(mail_servers: MailServers) -> None:
    async with client_for(mail_servers) as client:
        lunch = await client.get(mail_servers.uids["alternative"])
        invoice = await client.get(mail_servers.uids["attachment"])
    assert lunch.text == "Plain part: lunch is at noon at the noodle bar."
    assert lunch.cc == "Carol <carol@example.com>"
    assert invoice.text == "Please find the invoice attached."
    assert [(a.filename, a.content_type, a.size) for a in invoice.attachments] == [
        ("invoice-42.pdf", "application/pdf", len(ATTACHMENT_BYTES)), ("résumé.txt", "text/plain", 11)]


async def test_get_reading_does_not_mark_seen(mail_servers: MailServers) -> None:
    async with client_for(mail_servers) as client:
        assert (await client.get(mail_servers.uids["latin1"])).unseen
        assert (await client.get(mail_servers.uids["latin1"])).unseen


async def test_unknown_uid_and_unknown_folder_are_clear_errors(mail_servers: MailServers) -> None:
    async with client_for(mail_servers) as client:
        with pytest.raises(EmailError, match="no message with UID 9999 in 'INBOX'"):
            await client.get(9999)
        with pytest.raises(EmailError, match="cannot open folder 'Nope'"):
            await client.search(folder="Nope")
        assert len(await client.search(limit=1)) == 1  # the connection is still good after both


async def test_reconnects_after_the_server_dropped_the_connection(mail_servers: MailServers,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connectors.imap")
    async with client_for(mail_servers, imap_port=mail_servers.relay_port) as client:
        assert len(await client.search(subject="Invoice")) == 1
        mail_servers.relay.cut()
        assert len(await client.search(subject="Invoice")) == 1
        mail_servers.relay.cut()
        assert (await client.get(mail_servers.uids["attachment"])).subject == "Invoice 42"
    assert sum(r.getMessage().startswith("imap connected") for r in caplog.records) == 3


# --- IMAP failures and TLS -----------------------------------------------------------------------------

async def test_imap_down_says_unreachable(mail_servers: MailServers) -> None:
    async with client_for(mail_servers, imap_port=mail_servers.closed_port) as client:
        with pytest.raises(EmailError, match=rf"IMAP server 127.0.0.1:{mail_servers.closed_port} is unreachable"):
            await client.search()
        status = await client.status()
    assert "unreachable: connection refused" in status.imap and status.smtp == "ok" and not status.reachable


async def test_imap_wrong_password_says_login_failed_without_the_password(mail_servers: MailServers) -> None:
    async with client_for(mail_servers, password="not-the-password") as client:
        with pytest.raises(EmailError, match=r"IMAP login to .* as owner@example\.test failed") as err:
            await client.get(1)
    assert "not-the-password" not in str(err.value)


async def test_imap_silent_server_times_out(mail_servers: MailServers) -> None:
    async with client_for(mail_servers, imap_port=mail_servers.silent_port, timeout_s=0.3) as client:
        with pytest.raises(EmailError, match=re.escape("did not answer within 0.3s")):
            await client.search()


async def test_imap_tls_against_a_plain_port_is_a_tls_error(mail_servers: MailServers) -> None:
    async with client_for(mail_servers, imap_security="ssl") as client:
        with pytest.raises(EmailError, match=r"TLS handshake with IMAP server .* failed"):
            await client.search()


@pytest.mark.parametrize("security", ["ssl", "starttls"])
async def test_imap_over_tls(mail_servers: MailServers, security: str) -> None:
    port = mail_servers.imaps_port if security == "ssl" else mail_servers.imap_port
    async with client_for(mail_servers, imap_security=security, imap_port=port) as client:
        assert (await client.get(mail_servers.uids["utf8"])).message_id == "<report-1@example.org>"


async def test_imap_untrusted_certificate_is_rejected(mail_servers: MailServers) -> None:
    settings = mail_servers.settings(imap_security="ssl", imap_port=mail_servers.imaps_port)
    async with EmailClient(settings, tls_context=ssl.create_default_context()) as client:
        with pytest.raises(EmailError, match=r"TLS certificate of IMAP server .* was rejected"):
            await client.search()


# --- sending ---------------------------------------------------------------------------------------------

def outgoing(**overrides: object) -> OutgoingMessage:
    fields: dict[str, object] = dict(
        message_id=make_msgid(domain="example.test"), from_address="owner@example.test", from_name="Owner Example",
        to=["Bob <bob@example.net>"], cc=["carol@example.com"], bcc=["audit@example.org"],
        subject="Numbers — Grüße", body="Hello Bob,\n\nthe numbers are in. 你好!\n")
    return OutgoingMessage(**{**fields, **overrides})


async def test_send_delivers_exactly_the_message(mail_servers: MailServers, smtp_recorder: SmtpRecorder) -> None:
    message = outgoing()
    async with client_for(mail_servers) as client:
        result = await client.send(message.build(datetime(2024, 3, 8, 10, 0, tzinfo=UTC)))
    assert result.accepted == ["bob@example.net", "carol@example.com", "audit@example.org"]
    assert result.message_id == message.message_id and result.sent_copy == ""
    (got,) = smtp_recorder.received
    assert smtp_recorder.logins == ["owner@example.test"]
    assert got.mail_from == "owner@example.test"
    assert got.rcpt_tos == ["bob@example.net", "carol@example.com", "audit@example.org"]
    m = got.message
    assert (m["Message-ID"], m["Subject"], m["From"], m["To"], m["Cc"]) == (
        message.message_id, "Numbers — Grüße", "Owner Example <owner@example.test>", "Bob <bob@example.net>",
        "carol@example.com")
    assert m["Bcc"] is None and b"audit@example.org" not in got.data
    assert m.get_content().replace("\r\n", "\n") == "Hello Bob,\n\nthe numbers are in. 你好!\n"
    assert m["Date"] == "Fri, 08 Mar 2024 10:00:00 +0000"


async def test_send_through_a_relay_that_offers_no_auth(mail_servers: MailServers,
                                                        smtp_recorder: SmtpRecorder) -> None:
    async with client_for(mail_servers, smtp_port=mail_servers.smtp_open_port, smtp_username="") as client:
        assert (await client.status()).smtp == "ok"
        result = await client.send(outgoing(subject="Via the relay").build(datetime.now(UTC)))
    assert result.accepted == ["bob@example.net", "carol@example.com", "audit@example.org"]
    assert [r.message["Subject"] for r in smtp_recorder.received] == ["Via the relay"]
    assert smtp_recorder.logins == []
    async with client_for(mail_servers, smtp_port=mail_servers.smtp_open_port) as client:  # still set to log in
        with pytest.raises(EmailError, match='set smtp_username = ""'):
            await client.send(outgoing().build(datetime.now(UTC)))
    assert len(smtp_recorder.received) == 1


async def test_smtp_logs_in_with_its_own_user_name_and_password(mail_servers: MailServers,
                                                                smtp_recorder: SmtpRecorder) -> None:
    async with client_for(mail_servers, smtp_username=SMTP_USER, smtp_password=SMTP_PASSWORD) as client:
        status = await client.status()  # IMAP still logs in as the mailbox's user
        await client.send(outgoing(subject="As the mailer").build(datetime.now(UTC)))
    assert status.reachable and status.messages == len(SEED)
    assert smtp_recorder.logins == [SMTP_USER, SMTP_USER]
    assert [r.message["Subject"] for r in smtp_recorder.received] == ["As the mailer"]
    async with client_for(mail_servers, smtp_username=SMTP_USER) as client:  # the IMAP password is not its
        with pytest.raises(EmailError, match=f"SMTP login to 127.0.0.1:{mail_servers.smtp_port} as mailer failed"):
            await client.send(outgoing().build(datetime.now(UTC)))


def test_the_email_config_carries_the_smtp_login(make_config, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.services.factory import email_client

    monkeypatch.setenv("ANYY_TEST_IMAP_PASSWORD", "imap-pw")
    monkeypatch.setenv("ANYY_TEST_SMTP_PASSWORD", "smtp-pw")
    base = {"imap_host": "127.0.0.1", "smtp_host": "127.0.0.1", "username": "me@example.test",
            "from_address": "me@example.test", "password_env": "ANYY_TEST_IMAP_PASSWORD"}
    same = email_client(make_config(email=base).email).settings
    own = email_client(make_config(email={**base, "smtp_username": "mailer",
                                          "smtp_password_env": "ANYY_TEST_SMTP_PASSWORD"}).email).settings
    relay = email_client(make_config(email={**base, "smtp_username": ""}).email).settings
    assert (same.smtp_login, own.smtp_login, relay.smtp_login) == (
        ("me@example.test", "imap-pw"), ("mailer", "smtp-pw"), None)


async def test_send_files_a_copy_in_the_sent_folder(mail_servers: MailServers, smtp_recorder: SmtpRecorder) -> None:
    message = outgoing(subject="Sent copy check")
    async with client_for(mail_servers, sent_folder=SENT_FOLDER) as client:
        result = await client.send(message.build(datetime.now(UTC)))
        (copy,) = await client.search(folder=SENT_FOLDER, subject="Sent copy check")
        filed = await client.get(copy.uid, SENT_FOLDER)
    assert result.sent_copy == f"saved to {SENT_FOLDER}"
    assert filed.message_id == message.message_id and not filed.unseen
    assert len(smtp_recorder.received) == 1


async def test_smtp_refusal_carries_the_server_reason(mail_servers: MailServers, smtp_recorder: SmtpRecorder) -> None:
    smtp_recorder.refusal = "550 5.1.1 mailbox unavailable"
    async with client_for(mail_servers) as client:
        with pytest.raises(EmailError, match=r"refused every recipient: .*550 5\.1\.1 mailbox unavailable") as err:
            await client.send(outgoing().build(datetime.now(UTC)))
    assert not err.value.maybe_sent and smtp_recorder.received == []


async def test_smtp_down_silent_and_bad_login_are_clear(mail_servers: MailServers, smtp_recorder: SmtpRecorder) -> None:
    message, port = outgoing().build(datetime.now(UTC)), mail_servers.closed_port
    async with client_for(mail_servers, smtp_port=port) as client:
        with pytest.raises(EmailError, match=rf"SMTP server 127.0.0.1:{port} is unreachable: connection refused"):
            await client.send(message)
    async with client_for(mail_servers, smtp_port=mail_servers.silent_port, timeout_s=0.3) as client:
        with pytest.raises(EmailError, match=r"SMTP server .* did not answer within 0\.3s"):
            await client.send(message)
    async with client_for(mail_servers, password="wrong-smtp-pass") as client:
        with pytest.raises(EmailError, match=r"SMTP login to .* failed: 535") as err:
            await client.send(message)
    assert "wrong-smtp-pass" not in str(err.value) and PASSWORD not in str(err.value)
    assert smtp_recorder.received == []


@pytest.mark.parametrize("security", ["ssl", "starttls"])
async def test_smtp_over_tls(mail_servers: MailServers, smtp_recorder: SmtpRecorder, security: str) -> None:
    port = mail_servers.smtps_port if security == "ssl" else mail_servers.smtp_starttls_port
    async with client_for(mail_servers, smtp_security=security, smtp_port=port) as client:
        await client.send(outgoing().build(datetime.now(UTC)))
    assert len(smtp_recorder.received) == 1


# --- composing -----------------------------------------------------------------------------------------

def test_reply_subject_is_never_doubled() -> None:
    assert reply_subject("Project kickoff") == "Re: Project kickoff"
    for already in ("Re: Project kickoff", "RE: Project kickoff", "re:Project kickoff", "Re[2]: Project kickoff",
                    "AW: Projekt", "回复：项目启动"):
        assert reply_subject(already) == " ".join(already.split())


@pytest.mark.parametrize("bad", ["bob", "bob@", "@example.com", "bob@localhost", "bob@@example.com",
                                 "bob@exa mple.com", "a..b@example.com", "Bob <bob@example>", ""])
def test_malformed_addresses_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not"):
        parse_addresses(bad)


def test_addresses_are_normalized() -> None:
    assert parse_addresses("Ann Lee <ann@example.com>, bob@example.net") == ["Ann Lee <ann@example.com>",
                                                                            "bob@example.net"]
    assert parse_addresses('"Doe, John" <j@example.org>') == ['"Doe, John" <j@example.org>']


def test_a_message_needs_a_recipient_and_a_one_line_subject() -> None:
    with pytest.raises(ValueError, match="no recipients"):
        outgoing(to=[], cc=[], bcc=[])
    assert outgoing(subject="two\r\nBcc: evil@example.com").subject == "two Bcc: evil@example.com"


# --- drafts --------------------------------------------------------------------------------------------

async def test_drafts_change_until_sent_and_are_claimed_once(store: Store) -> None:
    drafts = Drafts(store)
    draft = await drafts.create("console:owner", {"subject": "one"})
    assert await drafts.get("console:other", draft.id) is None
    assert await drafts.update("console:other", draft.id, {"subject": "theirs"}) is None
    updated = await drafts.update("console:owner", draft.id, {"subject": "two"})
    assert updated is not None and updated.message == {"subject": "two"} and updated.state == "draft"
    assert not await drafts.claim("console:owner", draft.id, {"subject": "one"})  # not what it holds now
    assert await drafts.claim("console:owner", draft.id, {"subject": "two"})
    assert not await drafts.claim("console:owner", draft.id, {"subject": "two"})
    assert await drafts.update("console:owner", draft.id, {"subject": "three"}) is None
    got = await drafts.get("console:owner", draft.id)
    assert got is not None and (got.state, got.message) == ("sent", {"subject": "two"})
    assert await drafts.unmark_sent("console:owner", draft.id)
    reopened = await drafts.get("console:owner", draft.id)
    assert reopened is not None and reopened.state == "draft"
