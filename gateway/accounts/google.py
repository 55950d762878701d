"""Google: signing in (authorization code + PKCE S256 + `state`, loopback or paste), refreshing, revoking.

Google's device flow does not allow the Gmail scope, so the sign-in is the installed-app flow: the
redirect goes to `http://127.0.0.1:PORT/` and the code comes back to the listener or by paste
(gateway/accounts/loopback.py). One token covers every scope granted, so the same grant serves mail and
calendar.

Refreshing uses google-auth (`google.oauth2.credentials.Credentials.refresh`: its retries on 5xx and its
error parsing). The sign-in's two requests (code exchange, userinfo) are our own: google-auth has no
public call for the code exchange, and google-auth-oauthlib, which has one, would add oauthlib and
requests-oauthlib for a single POST and brings a blocking local server that cannot be raced against a
paste. Revoking is one POST to the documented endpoint, which google-auth does not wrap either.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from pydantic import SecretStr

from gateway.accounts.grant import GrantRefused, OAuthError, Resource, SignedIn, TokenGrant, token_error
from gateway.accounts.loopback import Loopback

if TYPE_CHECKING:
    import httpx

    from gateway.config.accounts import AccountConfig

log = logging.getLogger(__name__)

SCOPES: dict[Resource, str] = {"mail": "https://mail.google.com/",
                               "calendar": "https://www.googleapis.com/auth/calendar"}
IDENTITY_SCOPES = ["openid", "email"]
HTTP_TIMEOUT_S = 30.0


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier (RFC 7636: 43-128 unreserved characters) and its S256 challenge."""
    verifier = secrets.token_urlsafe(64)  # 86 characters
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def scopes_for(cfg: AccountConfig) -> list[str]:
    return IDENTITY_SCOPES + [SCOPES[r] for r in cfg.resources]


async def sign_in(cfg: AccountConfig, say: Callable[[str], None],
                  pasted: Callable[[], asyncio.Future[str]] | None) -> SignedIn:
    """Run the sign-in: print the link, take the code from the browser or a paste, exchange it."""
    import httpx

    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(32)
    async with Loopback("127.0.0.1") as loopback:
        query = {"client_id": cfg.client_id, "redirect_uri": loopback.redirect_uri, "response_type": "code",
                 "scope": " ".join(scopes_for(cfg)), "state": state, "code_challenge": challenge,
                 "code_challenge_method": "S256",
                 # offline: a refresh token; consent: a new one even when this client was allowed before
                 "access_type": "offline", "prompt": "consent"}
        say(f"Open this link in a browser and allow access:\n\n  {cfg.authorize_url}?{urlencode(query)}\n")
        say("Waiting for the browser. If it runs on another machine, it ends on a page that cannot "
            f"connect to {loopback.redirect_uri}: copy that page's whole address and paste it here.")
        code = await loopback.wait(state, pasted)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": loopback.redirect_uri,
                "client_id": cfg.client_id, "code_verifier": verifier}
        if (secret := cfg.client_secret()) is not None:
            form["client_secret"] = secret
        answer = await _token_request(http, cfg.token_url, form)
        if not answer.get("refresh_token"):
            raise OAuthError("Google sent no refresh token; remove Anyy's access at "
                             "https://myaccount.google.com/permissions and sign in again")
        grant = _grant(answer)
        address = await _userinfo_email(http, cfg.userinfo_url, grant.access_token.get_secret_value())
    return SignedIn(address=address, refresh_token=SecretStr(answer["refresh_token"]),
                    grants={r: grant.model_copy(update={"refresh_token": None}) for r in cfg.resources},
                    scopes=grant.scopes)


async def _token_request(http: httpx.AsyncClient, url: str, form: dict[str, str]) -> dict[str, Any]:
    import httpx

    try:
        response = await http.post(url, data=form, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise OAuthError(f"cannot reach the token endpoint {url}: {exc.__class__.__name__}") from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if response.status_code != 200 or "access_token" not in body:
        error = body.get("error", f"HTTP {response.status_code}")
        detail = body.get("error_description", "")
        message = f"the token endpoint refused the code: {error}" + (f" ({detail})" if detail else "")
        raise token_error(error, message)
    return body


def _grant(answer: dict[str, Any]) -> TokenGrant:
    try:
        lifetime = int(answer.get("expires_in", 3600))
    except (TypeError, ValueError):
        raise OAuthError("the token endpoint's answer has no usable expires_in") from None
    refresh = answer.get("refresh_token")
    return TokenGrant(access_token=SecretStr(answer["access_token"]),
                      expires_at=datetime.now(UTC) + timedelta(seconds=lifetime),
                      refresh_token=SecretStr(refresh) if refresh else None,
                      scopes=str(answer.get("scope", "")).split())


async def _userinfo_email(http: httpx.AsyncClient, url: str, access_token: str) -> str:
    """The signed-in address, from the OpenID userinfo endpoint (a token from the token endpoint over TLS
    is what proves it; the `email` scope was asked for it)."""
    import httpx

    try:
        response = await http.get(url, headers={"Authorization": f"Bearer {access_token}"})
        response.raise_for_status()
        email = response.json().get("email", "")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise OAuthError(f"cannot read the signed-in address from {url}: {exc.__class__.__name__}") from None
    if not isinstance(email, str) or "@" not in email:
        raise OAuthError(f"{url} named no email address for this sign-in")
    return email


class GoogleOAuth:
    """Refresh and revoke for one Google account's OAuth client."""

    def __init__(self, cfg: AccountConfig) -> None:
        self.cfg = cfg

    async def refresh(self, refresh_token: str, resource: Resource) -> TokenGrant:
        # google-auth is synchronous (requests): a worker thread, never the event loop
        return await asyncio.to_thread(self._refresh, refresh_token)

    def _refresh(self, refresh_token: str) -> TokenGrant:
        import google.auth.exceptions
        from google.auth.transport.requests import Request
        from google.oauth2.credentials import Credentials

        # A Desktop client has a secret; a public one sends it empty (google-auth requires the field).
        creds = Credentials(None, refresh_token=refresh_token, token_uri=self.cfg.token_url,
                            client_id=self.cfg.client_id, client_secret=self.cfg.client_secret() or "")
        try:
            creds.refresh(Request())
        except google.auth.exceptions.RefreshError as exc:
            data = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
            error = data.get("error")
            if error == "invalid_grant":
                detail = data.get("error_description") or "invalid_grant"
                raise GrantRefused(f"Google refused the refresh token: {detail}") from None
            raise token_error(error, f"Google's token endpoint failed: {error or 'no usable answer'}") from None
        except google.auth.exceptions.TransportError as exc:
            raise OAuthError(f"cannot reach Google's token endpoint: {exc.__class__.__name__}") from None
        if not creds.token or creds.expiry is None:
            raise OAuthError("Google's token endpoint answered without a token")
        rotated = creds.refresh_token if creds.refresh_token != refresh_token else None
        return TokenGrant(access_token=SecretStr(creds.token), expires_at=creds.expiry.replace(tzinfo=UTC),
                          refresh_token=SecretStr(rotated) if rotated else None,
                          scopes=list(creds.granted_scopes or []))

    async def revoke(self, refresh_token: str) -> bool:
        """Revoke the grant at Google (the refresh token and every access token from it)."""
        import httpx

        if not self.cfg.revoke_url:
            return False
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
                response = await http.post(self.cfg.revoke_url, data={"token": refresh_token})
        except httpx.HTTPError as exc:
            raise OAuthError(f"cannot reach {self.cfg.revoke_url}: {exc.__class__.__name__}") from None
        # 400 invalid_token: already revoked or expired, which is what was asked
        if response.status_code in (200, 400):
            return True
        raise OAuthError(f"{self.cfg.revoke_url} answered HTTP {response.status_code}")
