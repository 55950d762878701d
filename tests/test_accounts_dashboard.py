"""The dashboard's accounts page: state, address, services and the reconnect command of each account,
through HTTP with the session cookie as a browser sends it; and no page of the dashboard shows a token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from gateway.accounts import account_tokens
from gateway.accounts.grant import SignedIn, TokenGrant

ACCESS, REFRESH = "ya29.dash-ACCESS-7f3a", "1//dash-REFRESH-9c2e"
PAGES = ("", "approvals", "pairing", "automations", "tasks", "memory", "sessions", "audit", "skills", "accounts",
         "tools", "toolsets", "health")


async def test_accounts_page_shows_states_and_reconnect_commands_never_a_token(dashboard_config, start_console,
                                                                                start_dashboard) -> None:
    cfg = dashboard_config(
        email={"name": "fastmail", "imap_host": "imap.fastmail.example", "smtp_host": "smtp.fastmail.example",
               "username": "me@fastmail.example", "from_address": "me@fastmail.example"},
        accounts={"personal": {"provider": "google", "client_id": "id.apps.googleusercontent.com",
                               "services": ["calendar"]},
                  "work": {"provider": "microsoft", "client_id": "8c1e2f00-0000-4000-8000-00000000a11c"}})
    harness = await start_console(cfg)
    d = await start_dashboard(harness)
    grant = TokenGrant(access_token=SecretStr(ACCESS), expires_at=datetime.now(UTC) + timedelta(hours=1))
    await account_tokens(cfg, harness.gw.store).save_sign_in("personal", SignedIn(
        address="owner@gmail.example", refresh_token=SecretStr(REFRESH), grants={"calendar": grant},
        scopes=["openid", "email", "https://www.googleapis.com/auth/calendar"]))
    sealed = await harness.gw.store.run(lambda db: db.execute(
        "SELECT refresh_token FROM accounts WHERE name = 'personal'").fetchone()[0])
    client = await d.login()
    page = await d.page(client, "/dashboard/accounts")
    personal = page[page.index('id="account-personal"'):page.index('id="account-work"')]
    work = page[page.index('id="account-work"'):page.index("Signed in with a password")]
    assert "google" in personal and "owner@gmail.example" in personal and "calendar" in personal
    assert "connected" in personal and "Reconnect" not in personal
    assert "microsoft" in work and "email, calendar" in work and "sign-in needed" in work
    assert "Reconnect: run <code>anyy accounts add work</code>" in work
    assert "fastmail" in page and "me@fastmail.example" in page and "$ANYY_EMAIL_PASSWORD" in page
    assert 'href="/dashboard/accounts" class="here"' in page
    for path in PAGES:  # no page of the dashboard shows a token, in clear or sealed
        html = await d.page(client, f"/dashboard/{path}")
        for secret in (ACCESS, REFRESH, sealed[:24]):
            assert secret not in html, (path, secret)


async def test_accounts_page_without_accounts_says_how_to_add_one(dashboard_config, start_console,
                                                                   start_dashboard) -> None:
    harness = await start_console(dashboard_config())
    d = await start_dashboard(harness)
    page = await d.page(await d.login(), "/dashboard/accounts")
    assert "No Google or Microsoft account is configured" in page and "docs/accounts.md" in page
    assert "Signed in with a password" not in page
