"""The XOAUTH2-only IMAP and SMTP stand-ins work with aioimaplib and aiosmtplib as Gmail and Outlook do, and
refuse what they refuse: a password, an expired or revoked token, a token for another user or resource."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from email.message import EmailMessage

import aioimaplib
import aiosmtplib
import pytest

from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import (
    GOOGLE_CALENDAR,
    GOOGLE_MAIL,
    GRAPH_CALENDARS,
    MS_USER,
    OUTLOOK_IMAP,
    OUTLOOK_SMTP,
    OAuthFake,
)

GMAIL_USER = "mail-test@gmail.example"


def message(sender: str, subject: str) -> EmailMessage:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = sender, "friend@example.org", subject
    m.set_content("Hello from the test.\n")
    return m


async def imap(port: int) -> aioimaplib.IMAP4_SSL:
    client = aioimaplib.IMAP4_SSL("127.0.0.1", port, timeout=10)  # trusts the CA through SSL_CERT_FILE
    await client.wait_hello_from_server()
    return client


async def raw_authenticate(port: int, sasl: bytes) -> list[bytes]:
    """AUTHENTICATE by hand, answering a challenge with an empty line as Google's protocol page says."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl.create_default_context())
    lines = [await reader.readline()]
    writer.write(b"a1 AUTHENTICATE XOAUTH2 " + base64.b64encode(sasl) + b"\r\n")
    while not (line := await reader.readline()).startswith(b"a1 "):
        lines.append(line)
        if line.startswith(b"+ "):
            writer.write(b"\r\n")
    writer.close()
    return [*lines, line]


def sasl(user: str, token: str) -> bytes:
    return f"user={user}\x01auth=Bearer {token}\x01\x01".encode()


async def test_gmail_imap_takes_a_live_token_and_shows_labels_as_folders(oauth: OAuthFake,
                                                                         oauth_mail: OAuthMail) -> None:
    token = oauth.issue("google", [GOOGLE_MAIL], user=GMAIL_USER).access_token
    await asyncio.to_thread(oauth_mail.deliver, GMAIL_USER, message("a@example.org", "Welcome").as_bytes())
    client = await imap(oauth_mail.servers["google"].imap_port)
    assert "AUTH=XOAUTH2" in client.protocol.capabilities
    assert (await client.xoauth2(GMAIL_USER, token)).result == "OK"
    folders = b"".join((await client.list('""', "*")).lines).decode()
    assert '"[Gmail]/Sent Mail"' in folders and '"[Gmail]/All Mail"' in folders
    await client.select("INBOX")
    found = await client.uid_search("ALL")
    assert found.result == "OK" and found.lines[0].split()
    await client.logout()
    assert oauth_mail.logins == [("imap", GMAIL_USER)]


async def test_imap_refuses_passwords_and_dead_tokens(oauth: OAuthFake, oauth_mail: OAuthMail) -> None:
    port = oauth_mail.servers["google"].imap_port
    client = await imap(port)
    assert (await client.login(GMAIL_USER, "app-password")).result == "NO"
    await client.logout()

    issued = oauth.issue("google", [GOOGLE_MAIL], user=GMAIL_USER)
    oauth.expire_access_tokens()
    lines = await raw_authenticate(port, sasl(GMAIL_USER, issued.access_token))
    challenge = json.loads(base64.b64decode(lines[1][2:]))
    assert challenge == {"status": "401", "schemes": "bearer", "scope": GOOGLE_MAIL}
    assert lines[-1].startswith(b"a1 NO [AUTHENTICATIONFAILED]")

    calendar_only = oauth.issue("google", [GOOGLE_CALENDAR], user=GMAIL_USER).access_token
    assert (await raw_authenticate(port, sasl(GMAIL_USER, calendar_only)))[-1].startswith(b"a1 NO")
    someone_else = oauth.issue("google", [GOOGLE_MAIL], user="other@gmail.example").access_token
    assert (await raw_authenticate(port, sasl(GMAIL_USER, someone_else)))[-1].startswith(b"a1 NO")
    assert len(oauth_mail.refusals) == 4 and not oauth_mail.logins


async def test_outlook_imap_wants_an_outlook_token(oauth: OAuthFake, oauth_mail: OAuthMail) -> None:
    port = oauth_mail.servers["microsoft"].imap_port
    graph = oauth.issue("microsoft", [GRAPH_CALENDARS]).access_token
    client = await imap(port)
    assert (await client.xoauth2(MS_USER, graph)).result == "NO"  # Outlook answers NO at once, no challenge
    await client.logout()
    outlook = oauth.issue("microsoft", [OUTLOOK_IMAP, OUTLOOK_SMTP]).access_token
    client = await imap(port)
    assert (await client.xoauth2(MS_USER, outlook)).result == "OK"
    assert '"Sent Items"' in b"".join((await client.list('""', "*")).lines).decode()
    await client.logout()


async def test_gmail_smtp_sends_with_xoauth2_and_files_the_sent_copy(oauth: OAuthFake,
                                                                     oauth_mail: OAuthMail) -> None:
    token = oauth.issue("google", [GOOGLE_MAIL], user=GMAIL_USER).access_token

    async def live() -> str:
        return token

    smtp = oauth_mail.servers["google"].smtp_port
    await aiosmtplib.send(message(GMAIL_USER, "Sent by XOAUTH2"), hostname="127.0.0.1", port=smtp, use_tls=True,
                          username=GMAIL_USER, oauth_token_generator=live, timeout=10)
    assert [r.user for r in oauth_mail.received] == [GMAIL_USER]
    sent = await asyncio.to_thread(oauth_mail.messages, GMAIL_USER, "[Gmail]/Sent Mail")
    assert any(b"Subject: Sent by XOAUTH2" in raw for raw in sent)

    oauth.expire_access_tokens()
    with pytest.raises(aiosmtplib.SMTPAuthenticationError) as refused:
        await aiosmtplib.send(message(GMAIL_USER, "x"), hostname="127.0.0.1", port=smtp, use_tls=True,
                              username=GMAIL_USER, oauth_token_generator=live, timeout=10)
    assert refused.value.code == 535
    with pytest.raises(aiosmtplib.SMTPException, match=r"(?i)auth"):
        await aiosmtplib.send(message(GMAIL_USER, "x"), hostname="127.0.0.1", port=smtp, use_tls=True,
                              username=GMAIL_USER, password="app-password", timeout=10)
    assert len(oauth_mail.received) == 1


async def test_outlook_smtp_needs_starttls_and_the_signed_in_sender(oauth: OAuthFake,
                                                                    oauth_mail: OAuthMail) -> None:
    token = oauth.issue("microsoft", [OUTLOOK_SMTP]).access_token

    async def live() -> str:
        return token

    port = oauth_mail.servers["microsoft"].smtp_port
    await aiosmtplib.send(message(MS_USER, "Via Outlook"), hostname="127.0.0.1", port=port, start_tls=True,
                          username=MS_USER, oauth_token_generator=live, timeout=10)
    assert oauth_mail.received[-1].mail_from == MS_USER
    assert any(b"Via Outlook" in raw for raw in await asyncio.to_thread(oauth_mail.messages, MS_USER, "Sent Items"))
    with pytest.raises(aiosmtplib.SMTPSenderRefused):
        await aiosmtplib.send(message("boss@contoso.example", "Spoof"), hostname="127.0.0.1", port=port,
                              start_tls=True, username=MS_USER, oauth_token_generator=live, timeout=10)
    with pytest.raises(aiosmtplib.SMTPException):  # no AUTH before STARTTLS
        await aiosmtplib.send(message(MS_USER, "x"), hostname="127.0.0.1", port=port, start_tls=False,
                              username=MS_USER, oauth_token_generator=live, timeout=10)
    assert len(oauth_mail.received) == 1
