"""Several accounts at once (issue 37, item 6): a password mailbox ([email], the real test servers) beside a
Gmail account over OAuth (the XOAUTH2-only fakes), and a password CalDAV calendar (Radicale) beside a
Microsoft calendar (the Graph fake). Tools take an optional `account` (default: the first), the status
tools list every account, the approval preview names the account a message goes from or an event is
written to, a draft is sent from the account it was written in, and a guest gets no account at all."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.access import Access
from gateway.config import Config, parse_config
from gateway.services.accounts import account_services
from gateway.services.availability import availability
from store.db import Store
from tests.fixtures.caldav import CalDAVServer
from tests.fixtures.mail import USER, SmtpRecorder
from tests.support.account_signin import SECRET_ENV
from tests.support.context import RecordingContext
from tests.support.graph_fake import GraphFake
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.calendar import calendar_create, calendar_list, calendar_status
from toolsets.email import email_draft, email_send, email_status
from toolsets.registry import TOOLSETS

GMAIL = f"multi-{uuid.uuid4().hex[:8]}@gmail.example"  # this module's own user of the session-wide fakes


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


def config(tmp_path: Path, **sections: Any) -> Config:
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")}, **sections})
    cfg.data_dir = tmp_path / "data"
    return cfg


@pytest.fixture
async def two(tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, email_section: dict[str, Any],
              fake_ca: FakeCA, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A context with the password mailbox "default" first and the Gmail account "personal" second."""
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)
    cfg = config(tmp_path, email=email_section, accounts={"personal": account("google", oauth, oauth_mail, ["email"])})
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "personal", "google", GMAIL)
    ctx = RecordingContext(store=store, services=services)
    yield ctx
    await services["email"].aclose()


async def preview_and_send(ctx: RecordingContext, **args: Any) -> tuple[str, str]:
    parsed = email_send.args_model.model_validate(args)
    assert email_send.previewer is not None and email_send.effector is not None
    shown = await email_send.previewer(ctx, parsed)
    return shown.text, str(await email_send.effector(ctx, parsed, shown.payload))


async def test_status_lists_both_accounts_and_each_send_names_its_account(
        two: RecordingContext, oauth_mail: OAuthMail, smtp_recorder: SmtpRecorder) -> None:
    status = await call(email_status, two)
    assert status.startswith(f"Account default (the default):\n  Mailbox {USER}: IMAP ok; SMTP ok.")
    assert f"Account personal (google):\n  Mailbox {GMAIL}: IMAP ok; SMTP ok." in status
    only = await call(email_status, two, account="personal")
    assert only.startswith(f"Account personal (google):\n  Mailbox {GMAIL}") and USER not in only

    shown, sent = await preview_and_send(two, to=["ann@example.org"], subject="From Gmail", body="Hi",
                                         account="personal")
    assert shown.startswith(f"Send this email from account personal (google):\n\nFrom: {GMAIL}\n")
    assert sent.startswith('Sent "From Gmail"')
    shown, _ = await preview_and_send(two, to=["ann@example.org"], subject="From work", body="Hi")
    assert shown.startswith(f"Send this email from account default:\n\nFrom: {USER}\n")
    assert [m.mail_from for m in oauth_mail.received] == [GMAIL]
    assert [m.mail_from for m in smtp_recorder.received] == [USER]


async def test_a_draft_is_sent_from_the_account_it_was_written_in(two: RecordingContext, oauth_mail: OAuthMail,
                                                                  smtp_recorder: SmtpRecorder) -> None:
    drafted = await call(email_draft, two, to=["bob@example.net"], subject="Plan", body="Draft text",
                         account="personal")
    draft_id = re.search(r"Draft (\w+) saved", drafted).group(1)  # type: ignore[union-attr]
    assert f"From: {GMAIL}" in drafted
    revised = await call(email_draft, two, draft_id=draft_id, body="Revised text")  # stays in its account
    assert f"From: {GMAIL}" in revised
    with pytest.raises(ToolError, match=f"draft {draft_id} was written in account 'personal'"):
        await call(email_send, two, draft_id=draft_id, account="default")
    shown, sent = await preview_and_send(two, draft_id=draft_id)
    assert shown.startswith(f"Send this email (draft {draft_id}) from account personal (google):")
    assert "Revised text" in shown and sent.startswith('Sent "Plan"')
    assert [m.mail_from for m in oauth_mail.received] == [GMAIL] and smtp_recorder.received == []
    with pytest.raises(ToolError, match="there is no account 'nope'; the accounts are: default, personal"):
        await call(email_draft, two, to=["bob@example.net"], subject="x", body="y", account="nope")


async def test_two_calendar_accounts_each_write_names_its_account(
        tmp_path: Path, store: Store, oauth: OAuthFake, graph: GraphFake, caldav_server: CalDAVServer,
        fresh_calendar: str, fake_ca: FakeCA, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv("ANYY_TEST_CAL_PASSWORD", caldav_server.password)
    user = "multi-cal@contoso.example"
    cfg = config(tmp_path, calendar={"url": fresh_calendar, "username": caldav_server.username, "name": "home",
                                     "password_env": "ANYY_TEST_CAL_PASSWORD"},
                 accounts={"work": account("microsoft", oauth, services=["calendar"], graph_url=graph.url)})
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "work", "microsoft", user)
    ctx = RecordingContext(store=store, services=services)
    try:
        status = await call(calendar_status, ctx)
        assert status.startswith(f"Account home (the default):\nCalendar server {caldav_server.url.rstrip('/')}")
        assert f"Account work (microsoft):\nCalendar server {oauth.base_url}, user {user}: working." in status
        parsed = calendar_create.args_model.model_validate({"title": "Planning", "start": "2026-12-09T14:00",
                                                            "account": "work"})
        assert calendar_create.previewer is not None and calendar_create.effector is not None
        shown = await calendar_create.previewer(ctx, parsed)
        assert shown.text.startswith("Create an event in Calendar (account work (microsoft)):")
        await calendar_create.effector(ctx, parsed, shown.payload)
        assert [e["subject"] for e in graph.events(user)] == ["Planning"]
        at_home = (await calendar_create.previewer(ctx, calendar_create.args_model.model_validate(
            {"title": "Dinner", "start": "2026-12-09T19:00"}))).text
        assert at_home.startswith("Create an event in Scratch ") and "(account home):" in at_home.splitlines()[0]
        assert "Planning" in await call(calendar_list, ctx, start="2026-12-09", end="2026-12-09", account="work")
        assert "Planning" not in await call(calendar_list, ctx, start="2026-12-09", end="2026-12-09")
    finally:
        await services["calendar"].aclose()


async def test_a_guest_gets_no_account_even_when_the_config_lists_the_toolsets(tmp_path: Path) -> None:
    cfg = config(tmp_path, access={"guest_toolsets": ["tasks", "email", "calendar"]},
                 accounts={"personal": {"provider": "google", "client_id": "x.apps.googleusercontent.com"}})
    async with Store(tmp_path / "access.db") as store:
        access = Access(store, cfg, TOOLSETS)
        guest = [ts.name for ts in access.toolsets_for("guest", TOOLSETS)]
        owner = [ts.name for ts in access.toolsets_for("owner", TOOLSETS)]
    assert "tasks" in guest and "email" not in guest and "calendar" not in guest
    assert not access.guest_may_use("email") and not access.guest_may_use("calendar")
    assert {"email", "calendar"} <= set(owner)


def test_an_account_serving_a_service_makes_its_toolset_present(tmp_path: Path) -> None:
    mail_only = config(tmp_path, accounts={"work": {"provider": "microsoft", "client_id": "c", "services": ["email"]}})
    avail = availability(mail_only)
    assert "email" in avail and "calendar" not in avail
    assert "[accounts.NAME]" in avail.why_absent("calendar")
    assert "email" not in availability(config(tmp_path))


async def test_an_account_is_opened_once_and_asked_again_until_it_is_signed_in() -> None:
    from connectors.oauth_token import SignInNeeded
    from toolsets.accounts import AccountClients

    class Client:
        async def aclose(self) -> None: ...

    opened: list[Client] = []
    signed_in_yet = False

    async def opener() -> Client:
        if not signed_in_yet:
            raise SignInNeeded("work", "not signed in yet")
        await asyncio.sleep(0)  # another tool asks meanwhile
        opened.append(Client())
        return opened[-1]

    accounts = AccountClients({"work": opener})
    with pytest.raises(SignInNeeded):
        await accounts.pick(None)
    signed_in_yet = True  # `anyy accounts add work` while the resident runs
    first, second = await asyncio.gather(accounts.pick("work"), accounts.pick(None))
    assert len(opened) == 1 and first[1] is second[1] is opened[0]
