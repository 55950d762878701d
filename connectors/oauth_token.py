"""What a connector is given for an OAuth 2.0 account: a token provider, never a credential or the config.

The gateway's account service (gateway/accounts) implements the provider: it returns a valid access token
for one account and resource, refreshing it first when it is about to expire, and raises `SignInNeeded`
when the account can no longer get one (revoked, expired refresh token, never signed in), or
`TokenUnavailable` when it is still signed in but no token can be had right now (the token endpoint is
unreachable, or refused the OAuth client itself). Either is raised before anything reaches a mail or
calendar server, so the caller knows nothing was sent or changed.

A server may refuse a token before its recorded expiry (a revoked grant, Microsoft's continuous access
evaluation, a token cut off early). The connector then asks again, naming the token that was refused:
the provider refreshes rather than serving it again, and a refresh the provider refuses in turn ends as
`SignInNeeded`.
"""

from __future__ import annotations

from typing import Protocol


class TokenProvider(Protocol):
    """A live access token (bearer) for one account and one resource."""

    async def __call__(self, refused: str | None = None) -> str:
        """The token to use; `refused` is the token a server has just refused (never handed out again)."""
        ...


class SignInNeeded(Exception):
    """The account has no usable token. Its text is one line that says which command reconnects it; it
    names the account, never a token."""

    def __init__(self, account: str, reason: str) -> None:
        super().__init__(f"account {account!r} needs signing in again ({reason}): run `anyy accounts add {account}`")
        self.account = account
        self.reason = reason


class TokenUnavailable(Exception):
    """The account is signed in, but no live access token can be had right now: its provider's token
    endpoint cannot be reached, or it refused the OAuth client (a missing or wrong client secret). Nothing
    reached a mail or calendar server. Its text is one line naming the account and what to do, never a
    token."""

    def __init__(self, account: str, reason: str, remedy: str = "try again later") -> None:
        super().__init__(f"account {account!r} cannot get an access token right now ({reason}); {remedy}")
        self.account = account
        self.reason = reason
