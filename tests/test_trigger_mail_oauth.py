"""An email trigger on an OAuth mailbox (Google, SASL XOAUTH2 only): the watch signs in with the account's
token like the tools do, and new mail fires the trigger."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gateway.automations.mail_watch import MailWatcher
from gateway.automations.scheduler import AutomationService
from gateway.config import parse_config
from gateway.services.accounts import account_services
from store.db import Store
from store.records import Origin, Outbound
from tests.support.account_signin import SECRET_ENV
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.schedule import Reminder, parse_schedule

GMAIL = "owner@gmail.example"


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, fake_ca: FakeCA) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)


def mail(subject: str) -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = "Ann <ann@bank.example>", GMAIL, subject, "<oauth-1@bank>"
    m.set_content("Statement ready.\n")
    return m.as_bytes()


async def test_an_oauth_mailbox_is_watched_over_xoauth2(tmp_path: Path, store: Store, oauth: OAuthFake,
                                                        oauth_mail: OAuthMail, secrets: None) -> None:
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")},
                        "accounts": {"personal": account("google", oauth, oauth_mail, ["email"])}})
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "personal", "google", GMAIL)
    delivered: list[str] = []
    arrived = asyncio.Event()

    async def enqueue(outbound: Outbound, key: str) -> int:
        delivered.append(outbound.text)
        arrived.set()
        return len(delivered)

    service = AutomationService(store, ZoneInfo("UTC"), enqueue)
    await service.start()
    watcher = MailWatcher(store, service.list_all, service.fire_event, enqueue, services["email"])
    try:
        await service.create("telegram:1", Origin(surface="telegram", chat_id="1"), "bank",
                             parse_schedule({"type": "email", "account": "personal"}), Reminder(kind="reminder"))
        await watcher.start()
        await asyncio.wait_for(watcher.folders[("personal", "INBOX")].swept.wait(), 30)
        await asyncio.to_thread(oauth_mail.deliver, GMAIL, mail("Statement via Gmail"))
        await asyncio.wait_for(arrived.wait(), 30)
        assert delivered == ["📧 Ann \\<ann@bank.example\\>: Statement via Gmail"]
        assert ("imap", GMAIL) in oauth_mail.logins
    finally:
        await watcher.stop()
        await service.shutdown()
        await services["email"].aclose()
