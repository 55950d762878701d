"""Microsoft: signing in (device code, or `--paste`: authorization code + PKCE, loopback or paste),
refreshing one resource at a time, and (not) revoking — all through msal. The address saved is the
mailbox's primary SMTP address as Graph's `/me` gives it (the id token names the sign-in name, which
may differ), or the id token's when the account has no Graph token or Graph does not say.

Microsoft issues an access token for ONE resource per request: Outlook (IMAP, SMTP) and Graph (calendar)
each get their own, both from the one refresh token the sign-in yields. The sign-in consents to every
scope at once and redeems the first resource's token; each other resource's token comes from the
refresh token (`acquire_token_by_refresh_token`). Microsoft rotates refresh tokens: every answer carries
a new one and the one used dies, so the caller keeps the newest (TokenGrant.refresh_token).

msal is synchronous (requests): every call runs in a worker thread, never on the event loop. It reads
the endpoints from the authority's OpenID discovery document; the authority is the configured
`token_url` without `/oauth2/v2.0/token`. Instance discovery (a call to Microsoft asking whether the
authority is one of theirs) is off when the authority's host is not a Microsoft login host (tests,
private stand-ins); Microsoft's own hosts are known to msal and need no call either.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from gateway.accounts.grant import OAuthError, Resource, SignedIn, TokenGrant, token_error
from gateway.accounts.loopback import Loopback

if TYPE_CHECKING:
    import msal

    from gateway.config.accounts import AccountConfig

log = logging.getLogger(__name__)

# msal adds openid, profile and offline_access itself (and refuses them in a list).
SCOPES: dict[Resource, list[str]] = {
    "mail": ["https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send"],
    "calendar": ["https://graph.microsoft.com/Calendars.ReadWrite", "https://graph.microsoft.com/User.Read"],
}
TOKEN_PATH = "/oauth2/v2.0/token"
GRAPH_TIMEOUT_S = 30.0


def authority_of(cfg: AccountConfig) -> str:
    """The msal authority (`https://host/tenant`) behind the configured token endpoint."""
    if not cfg.token_url.endswith(TOKEN_PATH):
        raise OAuthError(f"token_url {cfg.token_url!r} does not end with {TOKEN_PATH} (a Microsoft identity "
                         "platform endpoint: https://HOST/TENANT/oauth2/v2.0/token)")
    return cfg.token_url.removesuffix(TOKEN_PATH)


class MicrosoftOAuth:
    """msal for one account's app registration: the sign-in flows, refresh per resource, revoke."""

    def __init__(self, cfg: AccountConfig) -> None:
        self.cfg = cfg
        self._app: msal.PublicClientApplication | None = None
        self._app_lock = asyncio.Lock()

    async def app(self) -> msal.PublicClientApplication:
        """The msal application, built once (building it fetches the discovery document)."""
        async with self._app_lock:
            if self._app is None:
                self._app = await _call(self._build)
            return self._app

    def _build(self) -> msal.PublicClientApplication:
        import msal
        from msal.authority import WELL_KNOWN_AUTHORITY_HOSTS

        authority = authority_of(self.cfg)
        known = urlsplit(authority).hostname in WELL_KNOWN_AUTHORITY_HOSTS
        return msal.PublicClientApplication(self.cfg.client_id, authority=authority,
                                            instance_discovery=None if known else False)

    # ---- signing in --------------------------------------------------------------------------------------
    def _all_scopes(self) -> list[str]:
        return [s for r in self.cfg.resources for s in SCOPES[r]]

    async def sign_in_device(self, say: Callable[[str], None]) -> SignedIn:
        """The device authorization grant (RFC 8628): print the link and code, poll until approved.
        msal's loop honours `interval`, `authorization_pending` and `slow_down` (+5 s); `expired_token`
        and a declined request end it with an error answer."""
        app = await self.app()
        flow = await _call(app.initiate_device_flow, scopes=self._all_scopes())
        if "user_code" not in flow:
            raise OAuthError(f"Microsoft did not start the device sign-in: {_said(flow)}")
        say(f"{flow.get('message') or 'Open ' + flow['verification_uri'] + ' and enter ' + flow['user_code']}\n"
            "Waiting for you to approve the sign-in there.")
        try:
            answer = await _call(app.acquire_token_by_device_flow, flow)
        except asyncio.CancelledError:
            flow["expires_at"] = 0  # msal's documented way to end its polling loop: the thread stops
            raise
        # msal's loop ends with the server's `expired_token`, or with the last `authorization_pending` when
        # the code's own expiry came first
        if answer.get("error") in ("expired_token", "authorization_pending", "slow_down"):
            raise OAuthError("the sign-in code expired before it was approved; run the command again")
        # The token is for one of the resources consented to: which one, its scopes say (msal sends the
        # scopes as a set, so the order asked for is not kept).
        return await self._finish(app, answer, _resource_of(str(answer.get("scope", "")).split()))

    async def sign_in_paste(self, say: Callable[[str], None],
                            pasted: Callable[[], asyncio.Future[str]] | None) -> SignedIn:
        """Authorization code with PKCE (msal makes the verifier, challenge and `state`), the redirect to
        `http://localhost:PORT/` caught by the listener or pasted by the owner."""
        app = await self.app()
        first = self.cfg.resources[0]
        # msal recommends response_mode=form_post (the code in a POST body, not the address); the address
        # is the point here, since the owner may have to paste it, so its warning would only confuse
        warnings.filterwarnings("ignore", message="response_mode='form_post' is recommended", category=UserWarning)
        async with Loopback("localhost") as loopback:
            flow = await _call(app.initiate_auth_code_flow, scopes=self._all_scopes(),
                               redirect_uri=loopback.redirect_uri, prompt="select_account")
            say(f"Open this link in a browser and allow access:\n\n  {flow['auth_uri']}\n")
            say("Waiting for the browser. If it runs on another machine, it ends on a page that cannot "
                f"connect to {loopback.redirect_uri}: copy that page's whole address and paste it here.")
            code = await loopback.wait(flow["state"], pasted)
        # Consent covered every resource; the code is redeemed for the first resource's token only.
        answer = await _call(app.acquire_token_by_auth_code_flow, flow, {"code": code, "state": flow["state"]},
                             scopes=SCOPES[first])
        return await self._finish(app, answer, first)

    async def _finish(self, app: msal.PublicClientApplication, answer: dict[str, Any],
                      first: Resource | None) -> SignedIn:
        """The first resource's answer in hand: the other resources' tokens from its refresh token."""
        grant = _grant(answer, "signing in")
        if grant.refresh_token is None:
            raise OAuthError("Microsoft sent no refresh token (is offline_access allowed for this app?)")
        refresh_token = grant.refresh_token.get_secret_value()
        grants: dict[Resource, TokenGrant] = {first: grant} if first in self.cfg.resources else {}
        for resource in self.cfg.resources:
            if resource not in grants:
                more = await self.refresh(refresh_token, resource)
                grants[resource] = more
                refresh_token = more.refresh_token.get_secret_value() if more.refresh_token else refresh_token
        claims = answer.get("id_token_claims") or {}
        # The id token names the sign-in name (UPN), which need not be the mailbox's address that mail is
        # sent from; Graph knows the latter, when the account has a Graph token to ask with.
        signed_in_as = claims.get("email") or claims.get("preferred_username") or ""
        address = await self._mailbox_address(grants["calendar"]) if "calendar" in grants else ""
        address = address or signed_in_as
        if "@" not in address:
            raise OAuthError("Microsoft's answer named no address for this sign-in")
        scopes = sorted({s for g in grants.values() for s in g.scopes})
        return SignedIn(address=address, refresh_token=SecretStr(refresh_token),
                        grants={r: g.model_copy(update={"refresh_token": None}) for r, g in grants.items()},
                        scopes=scopes)

    async def _mailbox_address(self, graph: TokenGrant) -> str:
        """The mailbox's primary SMTP address (Graph's `mail`), or "" when Graph has none or cannot say."""
        import httpx

        if not self.cfg.graph_url:
            return ""
        url = f"{self.cfg.graph_url.rstrip('/')}/me"
        headers = {"Authorization": f"Bearer {graph.access_token.get_secret_value()}"}
        try:
            async with httpx.AsyncClient(timeout=GRAPH_TIMEOUT_S) as http:
                response = await http.get(url, params={"$select": "mail,userPrincipalName"}, headers=headers)
            response.raise_for_status()
            mail = response.json().get("mail")
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning("graph_me_unreadable error=%s", exc.__class__.__name__)
            return ""
        return mail if isinstance(mail, str) and "@" in mail else ""

    # ---- the token service's calls ----------------------------------------------------------------------
    async def refresh(self, refresh_token: str, resource: Resource) -> TokenGrant:
        """A token for one resource; the answer's new refresh token replaces the one used (rotation)."""
        app = await self.app()
        answer = await _call(app.acquire_token_by_refresh_token, refresh_token, scopes=SCOPES[resource])
        return _grant(answer, "refreshing")

    async def revoke(self, refresh_token: str) -> bool:
        """Microsoft has no endpoint revoking a public client's refresh token; the owner removes the app's
        access at https://myapps.microsoft.com (work) or https://account.live.com/consent/Manage."""
        return False


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An msal call in a worker thread; transport and discovery failures become OAuthError."""
    import requests

    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except requests.RequestException as exc:
        raise OAuthError(f"cannot reach Microsoft's sign-in service: {exc.__class__.__name__}") from None
    except ValueError as exc:  # msal: discovery document unreadable, state mismatch, reserved scopes
        first_line = str(exc).splitlines()[0] if str(exc) else "ValueError"
        raise OAuthError(f"Microsoft sign-in failed: {first_line}") from None


def _resource_of(scopes: list[str]) -> Resource | None:
    """The resource a token's scopes belong to (Microsoft writes Graph's without their prefix)."""
    names = {s.rsplit("/", 1)[-1].lower() for s in scopes}
    for resource, wanted in SCOPES.items():
        if names & {w.rsplit("/", 1)[-1].lower() for w in wanted}:
            return resource
    return None


def _said(answer: dict[str, Any]) -> str:
    detail = str(answer.get("error_description", "")).splitlines()[0:1]
    return f"{answer.get('error', 'no answer')}" + (f" ({detail[0]})" if detail else "")


def _grant(answer: dict[str, Any], doing: str) -> TokenGrant:
    if "access_token" not in answer:
        message = f"Microsoft refused {doing}: {_said(answer)}"
        raise token_error(answer.get("error"), message)
    refresh = answer.get("refresh_token")
    return TokenGrant(access_token=SecretStr(answer["access_token"]),
                      expires_at=datetime.now(UTC) + timedelta(seconds=int(answer.get("expires_in", 3600))),
                      refresh_token=SecretStr(refresh) if refresh else None,
                      scopes=str(answer.get("scope", "")).split())
