"""OAuth accounts already signed in, pointed at the fakes: for tests of what runs on an account (mail,
calendar, tools), not of signing in (tests/test_accounts_signin.py does that).

`signed_in()` stores in the real `AccountTokens` what a sign-in would (tokens minted by the fake
authorization server for its user), so every token the connectors use is live at the fake's resource
servers and every refresh is a real call to its token endpoint (counted in `oauth.calls`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.accounts import AccountTokens
from gateway.accounts.grant import SignedIn, TokenGrant
from gateway.accounts.vault import Vault
from gateway.config import Config
from tests.support.account_signin import account_fields
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import (
    GOOGLE_CALENDAR,
    GOOGLE_MAIL,
    GRAPH_CALENDARS,
    GRAPH_USER,
    OUTLOOK_IMAP,
    OUTLOOK_SMTP,
    OAuthFake,
)

KEY = Fernet.generate_key().decode()  # the vault key of these tests (ANYY_SECRET_KEY of a child process)
Provider = Literal["google", "microsoft"]


def account(provider: Provider, oauth: OAuthFake, mail: OAuthMail | None = None,
            services: list[str] | None = None, **more: Any) -> dict[str, Any]:
    """An [accounts.NAME] table for `provider` whose endpoints are the fakes' (mail servers when given)."""
    fields = account_fields(provider, oauth.base_url, services, **more)
    if mail is not None:
        ports = mail.servers[provider]
        fields |= {"imap_host": "127.0.0.1", "imap_port": ports.imap_port,
                   "smtp_host": "127.0.0.1", "smtp_port": ports.smtp_port}
    return fields


def tokens(config: Config, store: Any) -> AccountTokens:
    return AccountTokens(config, store, Vault(config.data_dir, KEY))


async def signed_in(accounts: AccountTokens, oauth: OAuthFake, name: str, provider: Provider, user: str) -> None:
    """Store what `anyy accounts add NAME` stores after `user` consented. Google: one token for mail and
    calendar. Microsoft: the Outlook token for mail, and a calendar (Graph) token already expired, so the
    first calendar use refreshes it through the token endpoint as Microsoft's one-resource tokens need."""
    scopes = [GOOGLE_MAIL, GOOGLE_CALENDAR, "openid", "email"] if provider == "google" else \
        [OUTLOOK_IMAP, OUTLOOK_SMTP, GRAPH_CALENDARS, GRAPH_USER, "offline_access"]
    issued = oauth.issue(provider, scopes, user=user)
    assert issued.refresh_token is not None
    live = TokenGrant(access_token=SecretStr(issued.access_token), scopes=issued.scopes,
                      expires_at=datetime.now(UTC) + timedelta(seconds=issued.expires_in))
    graph = live if provider == "google" else TokenGrant(access_token=SecretStr("expired"), scopes=[GRAPH_CALENDARS],
                                                         expires_at=datetime.now(UTC) - timedelta(minutes=1))
    await accounts.save_sign_in(name, SignedIn(address=user, refresh_token=SecretStr(issued.refresh_token),
                                               grants={"mail": live, "calendar": graph}, scopes=scopes))
