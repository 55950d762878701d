"""The state and rules of the fake Google and Microsoft authorization servers (RFC 6749, 7636, 8628).

One `OAuthFake` per session holds the registered clients, the grants (a user's consent to a client for a
set of scopes), authorization codes, device authorizations, refresh and access tokens. The HTTP surface is
tests/support/oauth_http.py; the mail, CalDAV and Graph fakes ask `bearer()` whether a token is live.

What a test can rely on and drive (every method is thread-safe: the server runs in another thread):
- Clients: `GOOGLE_CLIENT_ID` + `GOOGLE_CLIENT_SECRET` (a Google "Desktop app" client: confidential),
  `MS_CLIENT_ID` (a Microsoft public client: sending it a secret is refused). Redirects allowed: any
  http loopback address and port (127.0.0.1, localhost, [::1]), as both providers allow native apps.
- Who signs in: `users["google"]` / `users["microsoft"]` (defaults `GOOGLE_USER`, `MS_USER`); the
  authorize page consents at once, unless `deny` is set (redirect with error=access_denied). Scopes in
  `withhold` are left unticked (Google's granular consent): granted without them.
- Lifetimes: `access_lifetime` (s, default 3600), `code_lifetime`, `device_lifetime` (900) and
  `device_interval` (1 here; the providers say 5). `expire_access_tokens()` ends every live access
  token now; `revoke(user)` ends a user's grants as if revoked in the account's security page.
- Google: the token endpoint keeps the refresh token (none in a refresh answer); a refresh token is only
  issued when the authorize request said `access_type=offline`, and for a user who consented to the
  client before (since the last `reset()`) only with `prompt=consent`; one access token covers all the
  grant's scopes. Microsoft: every refresh answer carries a NEW refresh token and the one used dies; an
  access token is for one resource (Outlook or Graph); asking for two in one refresh is `invalid_scope`
  (AADSTS28000), asking beyond the consent is `invalid_grant` (AADSTS65001).
- Codes are single use; a replayed code is `invalid_grant` and revokes what it issued (RFC 6749 10.5).
- Device flow: `wait_device()` blocks until a client asked for a device code and returns its user code;
  `approve_device(user_code)` / `decline_device(user_code)` play the user at the verification page.
  Polling sooner than the interval gets `slow_down` and adds 5 s to it (RFC 8628 3.5).
- `calls` counts requests per endpoint ("google.token", "microsoft.token.refresh_token", ...);
  `fail_next(key, status, body)` makes the next request to an endpoint answer that (a blip); while a key
  is in `down` (e.g. `oauth.down.add("google.token")`), every request to it answers 502 (an outage).
- `issue(provider, scopes)` mints a grant directly (no sign-in), for tests of connectors.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from tests.support.oauth_records import AccessToken, Client, Code, DeviceAuth, Grant, Issued, OAuthError, Provider

GOOGLE_CLIENT_ID = "1234-anyytest.apps.googleusercontent.com"
GOOGLE_CLIENT_SECRET = "GOCSPX-anyy-test-secret"
MS_CLIENT_ID = "8c1e2f00-0000-4000-8000-00000000a11c"
MS_TENANT_ID = "72f988bf-0000-4000-8000-0000000000aa"
MS_TENANTS = {"common", "organizations", "consumers", MS_TENANT_ID, "contoso.example"}
GOOGLE_USER = "owner@gmail.example"
MS_USER = "owner@contoso.example"

GOOGLE_MAIL = "https://mail.google.com/"
GOOGLE_CALENDAR = "https://www.googleapis.com/auth/calendar"
OUTLOOK_IMAP = "https://outlook.office.com/IMAP.AccessAsUser.All"
OUTLOOK_SMTP = "https://outlook.office.com/SMTP.Send"
GRAPH_CALENDARS = "Calendars.ReadWrite"
GRAPH_USER = "User.Read"
OIDC_SCOPES = {"openid", "email", "profile", "offline_access"}
GOOGLE_SCOPES = {GOOGLE_MAIL, GOOGLE_CALENDAR, "https://www.googleapis.com/auth/calendar.readonly",
                 "https://www.googleapis.com/auth/userinfo.email", "openid", "email", "profile"}
_OUTLOOK = "https://outlook.office.com/"
_GRAPH = "https://graph.microsoft.com/"


def ms_resource(scope: str) -> str | None:
    """The Microsoft resource a scope belongs to ("outlook" / "graph"), None for the OIDC scopes."""
    if scope in OIDC_SCOPES:
        return None
    return "outlook" if scope.lower().startswith(_OUTLOOK) else "graph"


def ms_short(scope: str) -> str:
    """Graph scopes without their resource prefix, as Microsoft writes them back."""
    return scope[len(_GRAPH):] if scope.lower().startswith(_GRAPH) else scope


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost", "::1"}


class OAuthFake:
    def __init__(self, base_url: str = "") -> None:
        self.base_url = base_url  # set by the host once it listens
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.clients = {GOOGLE_CLIENT_ID: Client(GOOGLE_CLIENT_ID, "google", GOOGLE_CLIENT_SECRET),
                        MS_CLIENT_ID: Client(MS_CLIENT_ID, "microsoft", None)}
        self.codes: dict[str, Code] = {}
        self.devices: dict[str, DeviceAuth] = {}
        self.refresh_tokens: dict[str, Grant] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.calls: Counter[str] = Counter()
        self.consented: set[tuple[str, str]] = set()  # (user, client) pairs that consented before
        self._failures: dict[str, tuple[int, dict[str, Any]]] = {}
        self.reset()

    def reset(self) -> None:
        """Default settings and zeroed counters (the per-test fixture calls this); tokens stay valid."""
        with self.lock:
            self.users: dict[Provider, str] = {"google": GOOGLE_USER, "microsoft": MS_USER}
            self.deny = False
            self.withhold: set[str] = set()
            self.consented.clear()
            self.access_lifetime = 3600.0
            self.code_lifetime = 600.0
            self.device_lifetime = 900.0
            self.device_interval = 1
            self.calls.clear()
            self._failures.clear()
            self.down: set[str] = set()

    # ---- driven by tests -------------------------------------------------------------------------------
    def fail_next(self, key: str, status: int = 503, body: dict[str, Any] | None = None) -> None:
        """The next request counted under `key` (e.g. "microsoft.token") answers `status` with `body`."""
        with self.lock:
            self._failures[key] = (status, body or {"error": "temporarily_unavailable",
                                                    "error_description": "The service is unavailable."})

    def count(self, key: str) -> None:
        with self.lock:
            self.calls[key] += 1

    def take_failure(self, key: str) -> tuple[int, dict[str, Any]] | None:
        """Count a request under `key`; the failure `fail_next` set for it, if any."""
        with self.lock:
            self.calls[key] += 1
            if key in self.down:  # a proxy in front of a server that is gone: no OAuth answer at all
                return 502, {}
            return self._failures.pop(key, None)

    def expire_access_tokens(self) -> None:
        with self.lock:
            now = time.time()
            for token in self.access_tokens.values():
                token.expires_at = min(token.expires_at, now)

    def revoke(self, user: str) -> int:
        """Revoke every grant of `user` (refresh and access tokens die); returns how many."""
        with self.lock:
            every = [*self.refresh_tokens.values(), *(t.grant for t in self.access_tokens.values())]
            grants = {id(g): g for g in every if g.user == user and not g.revoked}
            for grant in grants.values():
                grant.revoked = True
            return len(grants)

    def wait_device(self, timeout: float = 30) -> str:
        """Block until a device authorization is pending; returns its user code."""
        with self.changed:
            if not self.changed.wait_for(lambda: self._pending_device() is not None, timeout):
                raise TimeoutError("no client asked for a device code")
            pending = self._pending_device()
            assert pending is not None
            return pending.user_code

    def _pending_device(self) -> DeviceAuth | None:
        return next((d for d in reversed(self.devices.values()) if d.state == "pending"), None)

    def approve_device(self, user_code: str, user: str | None = None, *, approve: bool = True) -> None:
        """The user enters `user_code` at the verification page and approves (or declines)."""
        with self.lock:
            device = next(d for d in self.devices.values() if d.user_code == user_code)
            assert device.state == "pending", device.state
            device.state, device.user = ("approved", user or self.users["microsoft"]) if approve else ("declined", "")

    def decline_device(self, user_code: str) -> None:
        self.approve_device(user_code, approve=False)

    def issue(self, provider: Provider, scopes: list[str], user: str | None = None) -> Issued:
        """A grant minted without a sign-in: an access token for the scopes' (first) resource and a
        refresh token, as if the user had signed in to the default client."""
        client = GOOGLE_CLIENT_ID if provider == "google" else MS_CLIENT_ID
        with self.lock:
            grant = Grant(provider, user or self.users[provider], client, set(scopes))
            return self._mint(grant, scopes, refresh=True, first_resource=True)

    # ---- used by the resource servers ------------------------------------------------------------------
    def bearer(self, header_or_token: str | None) -> AccessToken | None:
        """The live access token named by an Authorization header ("Bearer x") or a bare token."""
        if not header_or_token:
            return None
        token = header_or_token.removeprefix("Bearer ").strip()
        with self.lock:
            found = self.access_tokens.get(token)
            if found is None or found.grant.revoked or found.expires_at <= time.time():
                return None
            return found

    # ---- the endpoints' rules (called by oauth_http) --------------------------------------------------
    def client(self, provider: Provider, client_id: str, secret: str | None, *, token_call: bool) -> Client:
        client = self.clients.get(client_id)
        if client is None or client.provider != provider:
            raise OAuthError("invalid_client", "The OAuth client was not found.", 401)
        if not token_call:
            return client
        if client.secret is None and secret:
            raise OAuthError("invalid_client", "AADSTS700025: Client is public so neither 'client_assertion' "
                             "nor 'client_secret' should be presented.", 401)
        if client.secret is not None and secret != client.secret:
            raise OAuthError("invalid_client", "Unauthorized" if secret else "client_secret is missing.", 401)
        return client

    def authorize(self, provider: Provider, q: dict[str, str]) -> Code:
        """Consent for the signed-in user; raises OAuthError for an answer sent back to the redirect."""
        scopes = q.get("scope", "").split()
        if q.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "Only response_type=code is supported.")
        unknown = [s for s in scopes if provider == "google" and s not in GOOGLE_SCOPES]
        if not scopes or unknown:
            raise OAuthError("invalid_scope", f"Some requested scopes were invalid: {unknown or 'none'}")
        method = q.get("code_challenge_method", "plain")
        if "code_challenge" in q and method not in {"S256", "plain"}:
            raise OAuthError("invalid_request", "Unsupported code_challenge_method.")
        if self.deny:
            raise OAuthError("access_denied", "The user declined to grant access.")
        with self.lock:
            granted = {s for s in scopes if s not in self.withhold}
            grant = Grant(provider, self.users[provider], q["client_id"], granted)
            first = (grant.user, grant.client_id) not in self.consented
            self.consented.add((grant.user, grant.client_id))
            offline = (q.get("access_type") == "offline" and (first or "consent" in q.get("prompt", "").split())
                       if provider == "google" else "offline_access" in granted)
            code = Code(secrets.token_urlsafe(24), grant, q["client_id"], q["redirect_uri"],
                        q.get("code_challenge"), method, offline, q.get("nonce"), time.time() + self.code_lifetime)
            self.codes[code.value] = code
            return code

    def redeem_code(self, client: Client, form: dict[str, str]) -> tuple[Issued, Code]:
        with self.lock:
            code = self.codes.get(form.get("code", ""))
            if code is None or code.client_id != client.client_id:
                raise OAuthError("invalid_grant", "Malformed auth code.")
            if code.used:
                for token in code.issued:
                    self.refresh_tokens[token].revoked = True
                raise OAuthError("invalid_grant", "The authorization code has already been used.")
            code.used = True
            if code.expires_at <= time.time():
                raise OAuthError("invalid_grant", "The authorization code has expired.")
            if form.get("redirect_uri") != code.redirect_uri:
                raise OAuthError("invalid_grant", "The redirect_uri does not match the authorization request.")
            if code.challenge is not None:
                verifier = form.get("code_verifier", "")
                if not verifier:
                    raise OAuthError("invalid_grant", "Missing code verifier.")
                if (s256(verifier) if code.method == "S256" else verifier) != code.challenge:
                    raise OAuthError("invalid_grant", "The code_verifier does not match the code_challenge.")
            requested = [s for s in form.get("scope", "").split() if s in code.grant.scopes]
            issued = self._mint(code.grant, requested or sorted(code.grant.scopes), refresh=code.offline,
                                first_resource=True)
            code.issued += [issued.refresh_token] if issued.refresh_token else []
            return issued, code

    def refresh(self, client: Client, form: dict[str, str]) -> Issued:
        with self.lock:
            token = form.get("refresh_token", "")
            grant = self.refresh_tokens.get(token)
            if grant is None or grant.revoked or grant.client_id != client.client_id:
                raise OAuthError("invalid_grant", "Token has been expired or revoked." if client.provider ==
                                 "google" else "AADSTS70000: The provided grant has expired or been revoked.")
            requested = form.get("scope", "").split() or sorted(grant.scopes)
            issued = self._mint(grant, requested, refresh=client.provider == "microsoft")
            if client.provider == "microsoft":
                del self.refresh_tokens[token]  # rotation: the one used dies (a refused request leaves it)
            return issued

    def start_device(self, client: Client, scopes: list[str]) -> DeviceAuth:
        with self.changed:
            device = DeviceAuth(secrets.token_urlsafe(32), secrets.token_hex(4).upper(), client.client_id,
                                scopes, time.time() + self.device_lifetime, self.device_interval)
            self.devices[device.device_code] = device
            self.changed.notify_all()
            return device

    def poll_device(self, client: Client, device_code: str) -> Issued:
        with self.lock:
            device = self.devices.get(device_code)
            if device is None or device.client_id != client.client_id:
                raise OAuthError("bad_verification_code", "AADSTS70019: The device code was not recognized.")
            now = time.time()
            too_soon = now - device.last_poll < device.interval - 0.05
            device.last_poll = now
            if device.expires_at <= now:
                raise OAuthError("expired_token", "AADSTS70020: The provided value for the input parameter "
                                 "'device_code' is no longer valid.")
            if device.state == "declined":
                raise OAuthError("authorization_declined", "AADSTS70016: the end user denied the request.")
            if device.state == "redeemed":
                raise OAuthError("invalid_grant", "AADSTS54005: The device code was already redeemed.")
            if too_soon:
                device.interval += 5
                raise OAuthError("slow_down", "The client polled faster than the interval.")
            if device.state == "pending":
                raise OAuthError("authorization_pending", "AADSTS70016: OAuth 2.0 device flow error. "
                                 "Authorization is pending. Continue polling.")
            device.state = "redeemed"
            grant = Grant("microsoft", device.user, client.client_id,
                          {s for s in device.scopes if s not in self.withhold})
            return self._mint(grant, [s for s in device.scopes if s in grant.scopes],
                              refresh="offline_access" in grant.scopes, first_resource=True)

    def revoke_token(self, token: str) -> bool:
        with self.lock:
            grant = self.refresh_tokens.get(token) or getattr(self.access_tokens.get(token), "grant", None)
            if grant is None or grant.revoked:
                return False
            grant.revoked = True
            return True

    def _mint(self, grant: Grant, requested: list[str], *, refresh: bool, first_resource: bool = False) -> Issued:
        if grant.provider == "google":
            asked = set(requested)
            if not asked <= grant.scopes:
                raise OAuthError("invalid_scope", "The requested scope exceeds the granted scopes.")
            scopes, resource = sorted(asked), "google"
        else:
            scopes, resource = self._ms_scopes(grant, requested, first_resource)
        token = ("ya29." if grant.provider == "google" else "EwB") + secrets.token_urlsafe(32)
        lifetime = self.access_lifetime
        self.access_tokens[token] = AccessToken(token, grant, frozenset(scopes), resource, time.time() + lifetime)
        refresh_token = None
        if refresh:
            refresh_token = ("1//" if grant.provider == "google" else "M.C5") + secrets.token_urlsafe(40)
            self.refresh_tokens[refresh_token] = grant
        return Issued(token, int(lifetime), scopes, refresh_token, grant.user)

    def _ms_scopes(self, grant: Grant, requested: list[str], first_resource: bool) -> tuple[list[str], str]:
        """The scopes and resource of one Microsoft access token. Consent may span resources, a token never
        does: redeeming a code or device code gives the first resource's token, a refresh asking for two
        is refused."""
        resources = [r for r in (ms_resource(s) for s in requested) if r]
        resource = resources[0] if resources else "graph"
        if len(set(resources)) > 1 and not first_resource:
            raise OAuthError("invalid_scope", "AADSTS28000: Provided value for the input parameter scope is "
                             "not valid because it contains more than one resource.")
        consented = {ms_short(s).lower() for s in grant.scopes}
        for scope in requested:
            if ms_resource(scope) and not scope.endswith("/.default") and ms_short(scope).lower() not in consented:
                raise OAuthError("invalid_grant", f"AADSTS65001: The user or administrator has not consented to "
                                 f"use the application for {scope}.")
        if any(s.endswith("/.default") for s in requested):
            requested = [s for s in grant.scopes if ms_resource(s) == resource]
        scopes = [ms_short(s) for s in requested if ms_resource(s) == resource]
        return scopes, resource
