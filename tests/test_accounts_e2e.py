"""End to end, as a new owner would: sign in with the real `anyy accounts add` (the test plays the browser
or approves the device code), then talk to a real `anyy chat` whose model (the fake) reads mail, sends it
after /approve, and books an event after /approve, on the Google and Microsoft stand-ins: XOAUTH2-only
IMAP and SMTP, CalDAV behind bearer tokens, Microsoft Graph. Then the access tokens expire and the next
turn refreshes them without the owner noticing, also in a process started afresh.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.account_signin import account_toml, consent, forget_devices, land, secret_env
from tests.support.cli import SUBPROCESS_S, anyy, model_config
from tests.support.crash import chat_once
from tests.support.google_caldav import GoogleCalDAV
from tests.support.graph_fake import GraphFake
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_USER, MS_USER, OAuthFake
from tests.support.tls_ca import FakeCA
from tests.test_accounts_cli import Running


def mail(to: str, subject: str) -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "ann@example.org", to, subject
    m["Message-ID"] = f"<{abs(hash(subject))}@example.org>"
    m.set_content("The numbers are attached.\n")
    return m.as_bytes()


def mail_servers(oauth_mail: OAuthMail, provider: str) -> dict[str, Any]:
    ports = oauth_mail.servers[provider]
    return {"imap_host": "127.0.0.1", "imap_port": ports.imap_port,
            "smtp_host": "127.0.0.1", "smtp_port": ports.smtp_port}


@pytest.fixture
def env(oauth: OAuthFake, fake_ca: FakeCA, home: dict[str, str]) -> dict[str, str]:
    forget_devices(oauth)
    return home | fake_ca.environ() | secret_env()  # no ANYY_SECRET_KEY: `accounts add` makes the key file


def last_tool_result(model: FakeModel) -> str:
    """The newest tool result the model was sent (the session's history holds the older ones too)."""
    results = [m for m in model.requests[-1].body.get("messages", []) if m.get("role") == "tool"]
    return json.dumps(results[-1].get("content")) if results else ""


def let_tokens_expire(oauth: OAuthFake, db: Path) -> None:
    """An hour passes for the access tokens: the provider no longer takes them, and the expiry the store
    keeps (the only clock Anyy's token service reads) is past."""
    oauth.expire_access_tokens()
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat(timespec="microseconds")
    with sqlite3.connect(db) as conn:
        assert conn.execute("UPDATE account_tokens SET expires_at = ?", (past,)).rowcount >= 1


async def approve_from_chat(cfg: str, env: dict[str, str], model: FakeModel, call: Any, ask: str) -> str:
    """One chat turn in which the model asks for a held call, then /approve in a second `anyy chat`."""
    model.script(call, reply("Waiting for your approval."))
    out = await chat_once(cfg, env, ask)
    found = re.search(r"/approve (\w+)", out)
    assert found, out
    model.script(reply("Done."))  # the follow-up turn after the decision
    return await chat_once(cfg, env, f"/approve {found.group(1)}")


DENTIST = tool_call("calendar_create", {"title": "Dentist", "start": "2026-12-15T10:00", "end": "2026-12-15T11:00"})


async def test_google_owner_signs_in_then_reads_sends_books_and_survives_expiry(
        tmp_path: Path, model: FakeModel, oauth: OAuthFake, oauth_mail: OAuthMail, google_caldav: GoogleCalDAV,
        env: dict[str, str]) -> None:
    cfg = model_config(tmp_path, model, f'[store]\npath = "{tmp_path / "anyy.db"}"\n\n'
                       + account_toml("personal", "google", oauth.base_url, caldav_url=google_caldav.url,
                                      **mail_servers(oauth_mail, "google")))
    run = await Running.start("accounts", "add", "personal", "--config", cfg, env=env)
    await land(await consent(await run.link()))
    code, out, err = await run.finish()
    assert code == 0, err
    code, out, err = await anyy("accounts", "test", "personal", "--config", cfg, env=env)
    assert code == 0 and "IMAP 127.0.0.1" in out and out.count("works") == 3, out + err
    signed_in_calls = oauth.calls["google.token.authorization_code"]

    await asyncio.to_thread(oauth_mail.deliver, GOOGLE_USER, mail(GOOGLE_USER, "Quarterly numbers"))
    model.script(tool_call("email_search", {"subject": "Quarterly"}), reply("Ann sent the quarterly numbers."))
    out = await chat_once(cfg, env, "any email from Ann about the quarter?")
    assert "Ann sent the quarterly numbers." in out
    assert "Quarterly numbers" in last_tool_result(model)

    thanks = tool_call("email_send", {"to": ["ann@example.org"], "subject": "Re: numbers", "body": "Thanks!"})
    out = await approve_from_chat(cfg, env, model, thanks, "email Ann a thank-you")
    assert [(s.user, s.rcpt_tos) for s in oauth_mail.received] == [(GOOGLE_USER, ["ann@example.org"])], out
    assert not any(m == "PUT" for m, _, _ in google_caldav.requests)
    await approve_from_chat(cfg, env, model, DENTIST, "put the dentist in my calendar")
    assert [s for m, _, s in google_caldav.requests if m == "PUT"] == [201]
    # every process so far used the access token saved at sign-in: not one refresh
    assert oauth.calls["google.token.refresh_token"] == 0
    assert oauth.calls["google.token.authorization_code"] == signed_in_calls == 1

    let_tokens_expire(oauth, tmp_path / "anyy.db")
    model.script(tool_call("email_search", {"subject": "Quarterly"}), reply("Still there."))
    out = await chat_once(cfg, env, "check my email again")  # a fresh process: the token comes from the store
    assert "Still there." in out and "anyy accounts add" not in out
    assert "Quarterly numbers" in last_tool_result(model)
    assert oauth.calls["google.token.refresh_token"] == 1 and oauth_mail.refusals == []
    listed = json.loads((await anyy("accounts", "list", "--json", "--config", cfg, env=env))[1])
    assert listed[0]["state"] == "connected"


async def test_microsoft_owner_signs_in_by_device_code_then_reads_sends_books_and_survives_expiry(
        tmp_path: Path, model: FakeModel, oauth: OAuthFake, oauth_mail: OAuthMail, graph: GraphFake,
        env: dict[str, str]) -> None:
    cfg = model_config(tmp_path, model, f'[store]\npath = "{tmp_path / "anyy.db"}"\n\n'
                       + account_toml("work", "microsoft", oauth.base_url, graph_url=graph.url,
                                      **mail_servers(oauth_mail, "microsoft")))
    run = await Running.start("accounts", "add", "work", "--config", cfg, env=env)
    oauth.approve_device(await asyncio.to_thread(oauth.wait_device, SUBPROCESS_S))
    code, out, err = await run.finish()
    assert code == 0 and MS_USER in out, err
    at_sign_in = oauth.calls["microsoft.token.refresh_token"]  # the second resource's token
    code, out, err = await anyy("accounts", "test", "work", "--config", cfg, env=env)
    assert code == 0 and out.count("works") == 3 and "Microsoft Graph" in out, out + err

    await asyncio.to_thread(oauth_mail.deliver, MS_USER, mail(MS_USER, "Budget review"))
    model.script(tool_call("email_search", {"subject": "Budget"}), reply("One mail about the budget."))
    assert "One mail about the budget." in await chat_once(cfg, env, "any email about the budget?")
    assert "Budget review" in last_tool_result(model)
    await approve_from_chat(cfg, env, model, tool_call(
        "email_send", {"to": ["ann@example.org"], "subject": "Budget", "body": "Seen."}), "email Ann back")
    assert [(s.provider, s.mail_from) for s in oauth_mail.received] == [("microsoft", MS_USER)]
    await approve_from_chat(cfg, env, model, DENTIST, "put the dentist in my calendar")
    assert [e["subject"] for e in graph.events(MS_USER)] == ["Dentist"]
    assert oauth.calls["microsoft.token.refresh_token"] == at_sign_in == 1

    let_tokens_expire(oauth, tmp_path / "anyy.db")
    model.script(tool_call("email_search", {"subject": "Budget"}), reply("Yes."))
    assert "Yes." in await chat_once(cfg, env, "check my email again")
    assert oauth_mail.refusals == []
    assert "Budget review" in last_tool_result(model)
    # one refresh, for Outlook, with the refresh token rotated at sign-in (the first one died then)
    assert oauth.calls["microsoft.token.refresh_token"] == at_sign_in + 1

    # Cut off long before its expiry (continuous access evaluation): the store still says an hour, the
    # refused token is refreshed at once and the owner notices nothing.
    oauth.expire_access_tokens()
    model.script(tool_call("email_search", {"subject": "Budget"}), reply("Still yes."))
    assert "Still yes." in await chat_once(cfg, env, "and now?")
    assert "Budget review" in last_tool_result(model) and oauth_mail.refusals == [("imap", MS_USER)]
    assert oauth.calls["microsoft.token.refresh_token"] == at_sign_in + 2
