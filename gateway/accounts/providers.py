"""The provider behind an account: what the token service calls (refresh, revoke) and what
`anyy accounts add` runs (the sign-in flow the provider and the owner's choice call for)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.accounts.grant import Resource, SignedIn, TokenGrant
    from gateway.config.accounts import AccountConfig


class OAuthProvider(Protocol):
    async def refresh(self, refresh_token: str, resource: Resource) -> TokenGrant:
        """A fresh access token for `resource`. The grant's refresh_token, when set, replaces the one
        used (Microsoft rotates it). Raises GrantRefused (sign in again) or OAuthError (retry later)."""
        ...

    async def revoke(self, refresh_token: str) -> bool:
        """Revoke the grant at the provider; False when the provider has no way to."""
        ...


def oauth_provider(cfg: AccountConfig) -> OAuthProvider:
    """The provider for one configured account (cheap: nothing is fetched until it is used)."""
    if cfg.provider == "google":
        from gateway.accounts.google import GoogleOAuth
        return GoogleOAuth(cfg)
    from gateway.accounts.microsoft import MicrosoftOAuth
    return MicrosoftOAuth(cfg)


async def sign_in(cfg: AccountConfig, say: Callable[[str], None], *, paste: bool,
                  pasted: Callable[[], asyncio.Future[str]] | None) -> SignedIn:
    """Run the account's sign-in. Google: authorization code with PKCE to a loopback address, or a pasted
    address. Microsoft: the device code flow, or with `paste` the same code flow as Google's (for tenants
    that block device code). `pasted` gives the owner's pasted line, where the flow reads one."""
    if cfg.provider == "google":
        from gateway.accounts import google
        return await google.sign_in(cfg, say, pasted)
    from gateway.accounts.microsoft import MicrosoftOAuth
    ms = MicrosoftOAuth(cfg)
    return await (ms.sign_in_paste(say, pasted) if paste else ms.sign_in_device(say))
