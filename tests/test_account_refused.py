"""A token a server refuses before its recorded expiry (issue 37, item 3): a grant revoked at the provider,
Microsoft's continuous access evaluation, a token cut off early. The stored expiry is far away in every test
here, so only the connector's report of the refused token (`TokenProvider(refused=...)`) makes Anyy refresh:
a revoked account answers the one line and its owners are told once; a token merely cut off is refreshed
once and the owner notices nothing. (Residents refreshing once on PostgreSQL: tests/test_account_tokens.py.)
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.config import parse_config
from gateway.services.accounts import account_services
from store.db import Store
from tests.support.account_signin import SECRET_ENV
from tests.support.context import RecordingContext
from tests.support.google_caldav import GoogleCalDAV
from tests.support.graph_fake import GraphFake
from tests.support.oauth_accounts import KEY, Provider, account, signed_in
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.calendar import calendar_list
from toolsets.email import email_search

NAME: dict[Provider, str] = {"google": "personal", "microsoft": "work"}
REFRESHES = {"google": "google.token.refresh_token", "microsoft": "microsoft.token.refresh_token"}
WEEK = {"start": "2026-12-07T00:00", "end": "2026-12-14T00:00"}


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


@pytest.fixture
async def signed(tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, google_caldav: GoogleCalDAV,
                 graph: GraphFake, fake_ca: FakeCA, monkeypatch: pytest.MonkeyPatch) -> Any:
    """make(provider): a context with one account of `provider` (mail and calendar) for a user of its own,
    signed in; the notices its AccountTokens would send are counted in `told`. Returns (ctx, user, told)."""
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)
    opened: list[dict[str, Any]] = []

    async def make(provider: Provider) -> tuple[RecordingContext, str, list[str]]:
        domain = "gmail.example" if provider == "google" else "contoso.example"
        user = f"early-{uuid.uuid4().hex[:8]}@{domain}"
        cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")}, "accounts": {
            NAME[provider]: account(provider, oauth, oauth_mail, caldav_url=google_caldav.url, graph_url=graph.url)}})
        cfg.data_dir = tmp_path / "data"
        services = account_services(cfg, store)
        opened.append(services)
        await signed_in(services["accounts"], oauth, NAME[provider], provider, user)
        told: list[str] = []

        async def notify() -> None:
            told.append(NAME[provider])

        services["accounts"].on_expired = notify
        return RecordingContext(store=store, services=services, tz=ZoneInfo("Europe/Berlin")), user, told

    yield make
    for services in opened:
        for name in ("email", "calendar"):
            await services[name].aclose()


@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_a_grant_revoked_long_before_the_tokens_expiry_ends_mail_and_calendar_in_one_line_and_one_notice(
        signed: Any, oauth: OAuthFake, provider: Provider) -> None:
    ctx, user, told = await signed(provider)
    await call(calendar_list, ctx, **WEEK)  # Microsoft: the Graph token, so both resources hold a live one
    refreshes = oauth.calls[REFRESHES[provider]]
    oauth.revoke(user)  # the stored expiries are still an hour away
    name = NAME[provider]
    line = (f"account '{name}' needs signing in again (its provider refused the sign-in: access revoked or"
            f" expired): run `anyy accounts add {name}`")
    with pytest.raises(ToolError) as mail_err:
        await call(email_search, ctx, subject="anything")
    assert str(mail_err.value) == line
    with pytest.raises(ToolError) as calendar_err:
        await call(calendar_list, ctx, **WEEK)
    assert str(calendar_err.value) == line
    assert told == [name]  # one notice
    assert oauth.calls[REFRESHES[provider]] == refreshes + 1  # one refresh, refused; then the account is expired
    assert next(s.state for s in await ctx.services["accounts"].states()) == "expired"


@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_a_token_cut_off_early_is_refreshed_once_and_the_owner_notices_nothing(
        signed: Any, oauth: OAuthFake, provider: Provider) -> None:
    ctx, _, told = await signed(provider)
    await call(calendar_list, ctx, **WEEK)  # Microsoft: the Graph token, so both resources hold a live one
    refreshes = oauth.calls[REFRESHES[provider]]
    oauth.expire_access_tokens()  # at the provider only: the store still says an hour
    assert (await call(email_search, ctx, subject="anything")) == "No messages in INBOX match."
    assert oauth.calls[REFRESHES[provider]] == refreshes + 1
    assert (await call(calendar_list, ctx, **WEEK)).startswith("No events from")
    # Google's one token covers mail and calendar; Microsoft's is for one resource (Outlook, Graph)
    after = refreshes + (1 if provider == "google" else 2)
    assert oauth.calls[REFRESHES[provider]] == after
    await call(email_search, ctx, subject="anything")
    await call(calendar_list, ctx, **WEEK)
    assert oauth.calls[REFRESHES[provider]] == after  # the new tokens are served from the store
    assert told == [] and next(s.state for s in await ctx.services["accounts"].states()) == "connected"
