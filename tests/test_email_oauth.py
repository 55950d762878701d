"""Mail on OAuth accounts (issue 37, item 4): Gmail and Microsoft 365 over SASL XOAUTH2, against IMAP and SMTP
stand-ins that accept nothing else (tests/support/oauth_mail.py) and tokens from the fake authorization server.

Every guarantee of the password mailbox holds: drafts, email_send held for approval and sent exactly once
(also across a kill -9 of a real `anyy chat`), server text shown as outside content; Gmail's and Outlook's
own sent copy is not duplicated; a refused token is asked for once more, then ends as one line; an account
whose sign-in died answers SignInNeeded's one line.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from email import message_from_bytes
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from connectors.email import EmailClient, EmailSettings
from connectors.mailerrors import EmailError
from gateway.config import Config, load_config, parse_config
from gateway.services.accounts import account_services
from store.db import Store
from tests.fixtures.model import reply, tool_call
from tests.support.account_signin import SECRET_ENV, account_toml
from tests.support.cli import SUBPROCESS_S, model_config
from tests.support.context import RecordingContext
from tests.support.crash import chat_once, start
from tests.support.oauth_accounts import KEY, account, signed_in, tokens
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, GOOGLE_MAIL, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.email import email_draft, email_get, email_search, email_send, email_status

# Users of this module alone: the fakes' mailboxes live for the whole session, other modules use theirs.
GMAIL = f"owner-{uuid.uuid4().hex[:8]}@gmail.example"
OUTLOOK = f"owner-{uuid.uuid4().hex[:8]}@contoso.example"


async def filed(oauth_mail: OAuthMail, user: str, folder: str, subject: str) -> int:
    """How many messages with this subject the provider filed in `folder`."""
    found = await asyncio.to_thread(oauth_mail.messages, user, folder)
    return sum(1 for raw in found if message_from_bytes(raw)["Subject"] == subject)


def mail(sender: str, to: str, subject: str, body: str = "Numbers attached.\n") -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = sender, to, subject, f"<{abs(hash(subject))}@example.org>"
    m.set_content(body)
    return m.as_bytes()


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def approve_send(ctx: RecordingContext, **args: Any) -> str:
    """What Approve does: build the preview, then run the effect with its stored payload."""
    parsed = email_send.args_model.model_validate(args)
    assert email_send.previewer is not None and email_send.effector is not None
    shown = await email_send.previewer(ctx, parsed)
    return str(await email_send.effector(ctx, parsed, shown.payload))


def config(tmp_path: Path, accounts: dict[str, Any], **more: Any) -> Config:
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")}, "accounts": accounts, **more})
    cfg.data_dir = tmp_path / "data"
    return cfg


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, fake_ca: FakeCA) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)


async def ctx_for(cfg: Config, store: Store, oauth: OAuthFake, **users: tuple[str, str]) -> RecordingContext:
    services = account_services(cfg, store)
    for name, (provider, user) in users.items():
        await signed_in(services["accounts"], oauth, name, provider, user)  # type: ignore[arg-type]
    return RecordingContext(store=store, services=services)


async def test_gmail_reads_drafts_and_sends_once_after_approval_without_a_second_sent_copy(
        tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, secrets: None) -> None:
    cfg = config(tmp_path, {"personal": account("google", oauth, oauth_mail, ["email"])})
    ctx = await ctx_for(cfg, store, oauth, personal=("google", GMAIL))
    await asyncio.to_thread(oauth_mail.deliver, GMAIL, mail("ann@example.org", GMAIL, "Quarterly numbers"))
    try:
        found = await call(email_search, ctx, subject="Quarterly numbers")
        assert "Quarterly numbers" in found and "email search in INBOX" in ctx.external_sources
        uid = int(re.search(r"uid (\d+)", found).group(1))  # type: ignore[union-attr]
        assert "Numbers attached." in await call(email_get, ctx, uid=uid)
        drafted = await call(email_draft, ctx, reply_to_uid=uid, body="Thanks, Ann.")
        draft_id = re.search(r"Draft (\w+) saved", drafted).group(1)  # type: ignore[union-attr]
        assert f"From: {GMAIL}" in drafted and oauth_mail.received == []
        sent = await approve_send(ctx, draft_id=draft_id)
        assert sent.startswith('Sent "Re: Quarterly numbers" to ann@example.org') and "Copy" not in sent
        with pytest.raises(ToolError, match="already sent"):
            await approve_send(ctx, draft_id=draft_id)
        assert [(s.user, s.rcpt_tos) for s in oauth_mail.received] == [(GMAIL, ["ann@example.org"])]
        # Gmail filed the one copy itself; a label is a folder to email_search.
        assert await filed(oauth_mail, GMAIL, "[Gmail]/Sent Mail", "Re: Quarterly numbers") == 1
        in_sent = await call(email_search, ctx, folder="[Gmail]/Sent Mail", subject="Quarterly")
        assert in_sent.startswith("1 message(s) in [Gmail]/Sent Mail")
        assert oauth_mail.logins.count(("smtp", GMAIL)) == 1
        # Every call of this turn used the stored access token: not one token-endpoint request.
        assert oauth.calls["google.token"] == 0
    finally:
        await ctx.services["email"].aclose()


async def test_microsoft_mail_signs_in_over_starttls_and_outlook_keeps_the_one_sent_copy(
        tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, secrets: None) -> None:
    cfg = config(tmp_path, {"work": account("microsoft", oauth, oauth_mail, ["email"])})
    ctx = await ctx_for(cfg, store, oauth, work=("microsoft", OUTLOOK))
    try:
        status = await call(email_status, ctx)
        assert status.startswith(f"Mailbox {OUTLOOK}: IMAP ok; SMTP ok.")
        sent = await approve_send(ctx, to=["bob@example.net"], subject="Status", body="All green.")
        assert sent.startswith('Sent "Status" to bob@example.net')
        (got,) = oauth_mail.received
        assert (got.provider, got.mail_from) == ("microsoft", OUTLOOK)
        assert await filed(oauth_mail, OUTLOOK, "Sent Items", "Status") == 1
        assert oauth.calls["microsoft.token"] == 0
    finally:
        await ctx.services["email"].aclose()


def gmail_settings(oauth_mail: OAuthMail) -> EmailSettings:
    ports = oauth_mail.servers["google"]
    return EmailSettings.model_validate({"imap_host": "127.0.0.1", "imap_port": ports.imap_port, "username": GMAIL,
                                         "smtp_host": "127.0.0.1", "smtp_port": ports.smtp_port, "from_address": GMAIL})


async def test_a_refused_token_is_asked_for_once_more_and_used_only_if_it_changed(
        oauth: OAuthFake, oauth_mail: OAuthMail, fake_ca: FakeCA) -> None:
    live = oauth.issue("google", [GOOGLE_MAIL], user=GMAIL).access_token
    asked: list[str | None] = []

    def provider(first: str, after_refusal: str) -> Any:
        # Answers by what it is told, not by call order: IMAP and SMTP (status checks both at once) each
        # get `first`, and `after_refusal` once they report `first` refused.
        async def token(refused: str | None = None) -> str:
            asked.append(refused)
            return after_refusal if refused == first else first
        return token

    # Stale first (another resident has just refreshed it), then the new one: both servers accept.
    async with EmailClient(gmail_settings(oauth_mail), token=provider("ya29.stale", live)) as client:
        status = await client.status()
    assert (status.imap, status.smtp) == ("ok", "ok")
    assert asked.count("ya29.stale") == 2 and asked.count(None) == 2  # IMAP's and SMTP's refusal reported
    assert oauth_mail.refusals.count(("imap", GMAIL)) == 1 and oauth_mail.logins.count(("imap", GMAIL)) == 1

    # The provider keeps handing the dead token: asked once more, then one line without the token.
    asked.clear()
    async with EmailClient(gmail_settings(oauth_mail), token=provider("ya29.dead-token-7", "ya29.dead-token-7")) \
            as client:
        with pytest.raises(EmailError) as err:
            await client.search(subject="x")
    text = str(err.value)
    assert asked == [None, "ya29.dead-token-7"] and "\n" not in text and "ya29.dead-token-7" not in text
    assert text.startswith(f"IMAP login to 127.0.0.1:{oauth_mail.servers['google'].imap_port} as {GMAIL} "
                           "refused the access token: ") and err.value.remote


async def test_a_revoked_account_answers_one_line_and_keeps_the_draft_unsent(
        tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, secrets: None) -> None:
    cfg = config(tmp_path, {"personal": account("google", oauth, oauth_mail, ["email"])})
    oauth.access_lifetime = 60  # inside the refresh margin: the next use refreshes, and finds the grant revoked
    ctx = await ctx_for(cfg, store, oauth, personal=("google", GMAIL))
    try:
        drafted = await call(email_draft, ctx, to=["ann@example.org"], subject="Hi", body="Hello")
        draft_id = re.search(r"Draft (\w+) saved", drafted).group(1)  # type: ignore[union-attr]
        parsed = email_send.args_model.model_validate({"draft_id": draft_id})
        assert email_send.previewer is not None and email_send.effector is not None
        payload = (await email_send.previewer(ctx, parsed)).payload
        oauth.revoke(GMAIL)
        line = "account 'personal' needs signing in again"
        with pytest.raises(ToolError) as err:
            await call(email_search, ctx, subject="x")
        assert str(err.value).startswith(line) and "`anyy accounts add personal`" in str(err.value)
        assert "\n" not in str(err.value)
        with pytest.raises(ToolError, match=f"not sent: {line}.*draft {draft_id} is kept"):
            await email_send.effector(ctx, parsed, payload)
        assert oauth_mail.received == [] and oauth.calls["google.token"] == 1  # one refresh, refused
        assert (await call(email_status, ctx)).startswith(line)
    finally:
        await ctx.services["email"].aclose()


async def test_killed_during_an_oauth_send_the_message_goes_out_at_most_once(
        tmp_path: Path, model: Any, home: dict[str, str], oauth: OAuthFake, oauth_mail: OAuthMail,
        fake_ca: FakeCA) -> None:
    cfg_path = model_config(tmp_path, model, f'[store]\npath = "{tmp_path / "anyy.db"}"\n\n' + account_toml(
        "personal", "google", oauth.base_url, ["email"], imap_host="127.0.0.1",
        imap_port=oauth_mail.servers["google"].imap_port, smtp_host="127.0.0.1",
        smtp_port=oauth_mail.servers["google"].smtp_port))
    env = {**home, **fake_ca.environ(), "ANYY_SECRET_KEY": KEY, SECRET_ENV: GOOGLE_CLIENT_SECRET}
    cfg = load_config(cfg_path)
    async with cfg.new_store() as store:
        await signed_in(tokens(cfg, store), oauth, "personal", "google", GMAIL)
    model.script(tool_call("email_send", {"to": ["anna@example.net"], "subject": "Lunch", "body": "At 12",
                                          "account": "personal"}), reply("Asked for approval."))
    out = await chat_once(cfg_path, env, "email anna about lunch")
    approval_id = re.search(r"/approve (\w+)", out).group(1)  # type: ignore[union-attr]
    oauth_mail.stall = True  # the server has the message; the sender waits for its "250"
    child = await start("chat", cfg_path, env, lines=[f"/approve {approval_id}"])
    assert await asyncio.to_thread(oauth_mail.arrived.wait, SUBPROCESS_S)
    await child.kill()
    oauth_mail.stall = False
    out = await chat_once(cfg_path, env)
    assert "Its outcome is unknown and it will not be retried automatically" in out
    assert "Already unknown" in await chat_once(cfg_path, env, f"/approve {approval_id}")
    assert len(oauth_mail.received) == 1
    # Gmail files what it accepted (the fake does so once the stall ends, on its own time); never twice.
    assert await filed(oauth_mail, GMAIL, "[Gmail]/Sent Mail", "Lunch") <= 1

