"""What a sign-in or a refresh yields, and the two ways talking to an authorization server fails.

These are the values passed between the provider flows (google.py, microsoft.py, providers.py) and the
token store (tokens.py). Secrets are `SecretStr` so that a repr, a log line or an error never shows them.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, SecretStr

from gateway.config.accounts import Resource

__all__ = ["ClientRefused", "GrantRefused", "OAuthError", "Resource", "SignedIn", "TokenGrant", "token_error"]


class TokenGrant(BaseModel):
    """An access token for one resource (mail or calendar), as the token endpoint issued it."""

    access_token: SecretStr
    expires_at: datetime
    """When the access token stops working (timezone-aware, UTC)."""
    refresh_token: SecretStr | None = None
    """The refresh token issued with it when the provider rotated it (Microsoft does), else None: keep the old one."""
    scopes: list[str] = []
    """The scopes the provider says it granted (empty when it did not say)."""


class SignedIn(BaseModel):
    """The result of `anyy accounts add`: the address signed in, one refresh token, a token per resource."""

    address: str
    refresh_token: SecretStr
    grants: dict[Resource, TokenGrant]
    scopes: list[str]
    """Every scope granted across the resources, to tell a sign-in that lacks one ("missing scopes")."""


class GrantRefused(Exception):
    """The authorization server refused the grant (`invalid_grant`): the refresh token was revoked, expired,
    or belongs to a Google app left in "Testing". Only signing in again helps."""


class OAuthError(Exception):
    """Any other failure talking to the authorization server (network, 5xx, an answer we cannot read):
    retry later; the account stays connected."""


class ClientRefused(OAuthError):
    """The authorization server refused the OAuth client itself (`invalid_client`, `unauthorized_client`):
    its secret is missing or wrong (not in secrets.env, say), or the client id is wrong or was deleted. The
    sign-in is intact: fixing the configuration and restarting helps, signing in again does not."""


CLIENT_ERRORS = frozenset({"invalid_client", "unauthorized_client"})


def token_error(error: object, message: str) -> Exception:
    """The exception for a token endpoint's `error` code: GrantRefused, ClientRefused or OAuthError."""
    if error == "invalid_grant":
        return GrantRefused(message)
    return ClientRefused(message) if error in CLIENT_ERRORS else OAuthError(message)
