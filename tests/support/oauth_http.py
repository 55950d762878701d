"""The HTTP face of the fake authorization servers: Google's and Microsoft's documented paths on one app.

Google (base = the fake's URL in place of accounts.google.com / oauth2.googleapis.com /
openidconnect.googleapis.com):
    GET  /o/oauth2/v2/auth              consents at once, 302 to redirect_uri?code=&state=&scope=
    POST /token                         authorization_code (PKCE, redirect_uri, client secret) / refresh_token
    POST /revoke                        token=... (either kind): the whole grant ends
    GET  /v1/userinfo                   Bearer -> {"sub", "email", "email_verified"}
    GET  /.well-known/openid-configuration, /oauth2/v3/certs
Microsoft identity platform (base in place of https://login.microsoftonline.com, tenant = common,
organizations, consumers, contoso.example or MS_TENANT_ID):
    GET  /{tenant}/v2.0/.well-known/openid-configuration   what msal fetches first (instance_discovery=False)
    GET  /{tenant}/oauth2/v2.0/authorize, POST /{tenant}/oauth2/v2.0/token, POST /{tenant}/oauth2/v2.0/devicecode
    GET  /oidc/userinfo (graph.microsoft.com's, with a Graph token), /{tenant}/discovery/v2.0/keys
Errors are the documented JSON `{"error", "error_description"}` (Microsoft adds error_codes, trace_id,
correlation_id, timestamp) with 400, or 401 for invalid_client; an authorize request with an unknown client
or a non-loopback redirect gets an error page instead of a redirect (RFC 6749 4.1.2.1). ID tokens are
RS256 JWTs signed with a key published at the JWKS URL.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.oauth_provider import (
    MS_TENANT_ID,
    MS_TENANTS,
    Issued,
    OAuthError,
    OAuthFake,
    Provider,
    loopback,
)

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_KID = "anyy-test-key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: dict[str, Any]) -> str:
    head = _b64(json.dumps({"alg": "RS256", "kid": _KID, "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = _KEY.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{_b64(signature)}"


def _jwks() -> dict[str, Any]:
    numbers = _KEY.public_key().public_numbers()

    def number(n: int) -> str:
        return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))

    return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": _KID, "n": number(numbers.n),
                      "e": number(numbers.e)}]}


def _sub(user: str) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, user).hex


def _error(provider: Provider, exc: OAuthError) -> web.Response:
    body: dict[str, Any] = {"error": exc.error, "error_description": exc.description}
    if provider == "microsoft":
        code = re.match(r"AADSTS(\d+)", exc.description)
        body |= {"error_codes": [int(code.group(1))] if code else [], "trace_id": str(uuid.uuid4()),
                 "correlation_id": str(uuid.uuid4()), "timestamp": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")}
    return web.json_response(body, status=exc.status, headers={"Cache-Control": "no-store"})


def _client_credentials(request: web.Request, form: dict[str, str]) -> tuple[str, str | None]:
    """client_id and secret from the form or from HTTP Basic (RFC 6749 2.3.1)."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Basic "):
        name, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        return unquote(name), unquote(secret)
    return form.get("client_id", ""), form.get("client_secret") or None


class OAuthRoutes:
    def __init__(self, fake: OAuthFake) -> None:
        self.fake = fake

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/o/oauth2/v2/auth", self.google_authorize)
        app.router.add_post("/token", self.google_token)
        app.router.add_post("/revoke", self.google_revoke)
        app.router.add_get("/v1/userinfo", self.google_userinfo)
        app.router.add_get("/.well-known/openid-configuration", self.google_discovery)
        app.router.add_get("/oauth2/v3/certs", self.keys)
        app.router.add_get("/oidc/userinfo", self.ms_userinfo)
        app.router.add_get("/devicelogin", self.device_page)
        app.router.add_get("/{tenant}/v2.0/.well-known/openid-configuration", self.ms_discovery)
        app.router.add_get("/{tenant}/discovery/v2.0/keys", self.keys)
        app.router.add_get("/{tenant}/oauth2/v2.0/authorize", self.ms_authorize)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self.ms_token)
        app.router.add_post("/{tenant}/oauth2/v2.0/devicecode", self.ms_devicecode)

    # ---- shared ---------------------------------------------------------------------------------------
    def _failure(self, key: str) -> web.Response | None:
        failure = self.fake.take_failure(key)
        return web.json_response(failure[1], status=failure[0]) if failure else None

    async def _authorize(self, provider: Provider, request: web.Request) -> web.Response:
        if failed := self._failure(f"{provider}.authorize"):
            return failed
        q = dict(request.query)
        redirect = q.get("redirect_uri", "")
        try:
            self.fake.client(provider, q.get("client_id", ""), None, token_call=False)
        except OAuthError as exc:
            return web.Response(status=400, content_type="text/html",
                                text=f"<h1>Error 401: {exc.error}</h1><p>{exc.description}</p>")
        if not loopback(redirect):
            return web.Response(status=400, content_type="text/html",
                                text="<h1>Error 400: redirect_uri_mismatch</h1>")
        answer: dict[str, str] = {}
        try:
            code = self.fake.authorize(provider, q)
            answer["code"] = code.value
            if provider == "google":
                answer |= {"scope": " ".join(sorted(code.grant.scopes)), "authuser": "0", "prompt": "consent"}
            else:
                answer["session_state"] = str(uuid.uuid4())
        except OAuthError as exc:
            answer = {"error": exc.error, "error_description": exc.description}
        if "state" in q:
            answer["state"] = q["state"]
        separator = "&" if "?" in redirect else "?"
        raise web.HTTPFound(f"{redirect}{separator}{urlencode(answer)}")

    async def _token(self, provider: Provider, request: web.Request, tenant: str = "") -> web.Response:
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        grant_type = form.get("grant_type", "")
        self.fake.count(f"{provider}.token.{grant_type.rsplit(':', 1)[-1]}")
        if failed := self._failure(f"{provider}.token"):
            return failed
        try:
            client_id, secret = _client_credentials(request, form)
            client = self.fake.client(provider, client_id, secret, token_call=True)
            nonce = None
            if grant_type == "authorization_code":
                issued, code = self.fake.redeem_code(client, form)
                nonce = code.nonce
            elif grant_type == "refresh_token":
                issued = self.fake.refresh(client, form)
            elif grant_type == DEVICE_GRANT and provider == "microsoft":
                issued = self.fake.poll_device(client, form.get("device_code", ""))
            else:
                raise OAuthError("unsupported_grant_type", f"Unsupported grant_type {grant_type!r}.")
        except OAuthError as exc:
            return _error(provider, exc)
        body = self._token_body(provider, issued, client_id, tenant, nonce, form.get("client_info") == "1")
        return web.json_response(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _token_body(self, provider: Provider, issued: Issued, client_id: str, tenant: str, nonce: str | None,
                    client_info: bool) -> dict[str, Any]:
        with self.fake.lock:
            grant = self.fake.access_tokens[issued.access_token].grant
            oidc = sorted(s for s in grant.scopes if s in {"openid", "profile", "email"})
        scopes = issued.scopes + [s for s in oidc if s not in issued.scopes and provider == "microsoft"]
        body: dict[str, Any] = {"access_token": issued.access_token, "token_type": "Bearer",
                                "expires_in": issued.expires_in, "scope": " ".join(scopes)}
        if provider == "microsoft":
            body["ext_expires_in"] = issued.expires_in
        if issued.refresh_token:
            body["refresh_token"] = issued.refresh_token
        if "openid" in grant.scopes:
            now = int(time.time())
            claims: dict[str, Any] = {"iss": self._issuer(provider), "aud": client_id, "sub": _sub(issued.user),
                                      "iat": now, "exp": now + 3600, "email": issued.user}
            if provider == "google":
                claims |= {"email_verified": True, "azp": client_id}
            else:
                claims |= {"preferred_username": issued.user, "name": "Owner Example", "oid": _sub(issued.user),
                           "tid": MS_TENANT_ID, "ver": "2.0"}
            if nonce:
                claims["nonce"] = nonce
            body["id_token"] = _jwt(claims)
        if provider == "microsoft" and client_info:
            body["client_info"] = _b64(json.dumps({"uid": _sub(issued.user), "utid": MS_TENANT_ID}).encode())
        return body

    def _issuer(self, provider: Provider) -> str:
        return self.fake.base_url if provider == "google" else f"{self.fake.base_url}/{MS_TENANT_ID}/v2.0"

    async def keys(self, request: web.Request) -> web.Response:
        return web.json_response(_jwks())

    # ---- Google ---------------------------------------------------------------------------------------
    async def google_authorize(self, request: web.Request) -> web.Response:
        return await self._authorize("google", request)

    async def google_token(self, request: web.Request) -> web.Response:
        return await self._token("google", request)

    async def google_revoke(self, request: web.Request) -> web.Response:
        if failed := self._failure("google.revoke"):
            return failed
        form = await request.post()
        token = str(form.get("token") or request.query.get("token", ""))
        if not self.fake.revoke_token(token):
            return _error("google", OAuthError("invalid_token", "Token expired or revoked"))
        return web.json_response({})

    async def google_userinfo(self, request: web.Request) -> web.Response:
        if failed := self._failure("google.userinfo"):
            return failed
        token = self.fake.bearer(request.headers.get("Authorization"))
        if token is None or token.resource != "google":
            return web.json_response({"error": "invalid_request", "error_description": "Invalid Credentials"},
                                     status=401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        body: dict[str, Any] = {"sub": _sub(token.user)}
        if token.scopes & {"email", "https://www.googleapis.com/auth/userinfo.email"}:
            body |= {"email": token.user, "email_verified": True}
        return web.json_response(body)

    async def google_discovery(self, request: web.Request) -> web.Response:
        base = self.fake.base_url
        return web.json_response({
            "issuer": base, "authorization_endpoint": f"{base}/o/oauth2/v2/auth", "token_endpoint": f"{base}/token",
            "userinfo_endpoint": f"{base}/v1/userinfo", "revocation_endpoint": f"{base}/revoke",
            "jwks_uri": f"{base}/oauth2/v3/certs", "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["plain", "S256"],
            "grant_types_supported": ["authorization_code", "refresh_token"]})

    # ---- Microsoft ------------------------------------------------------------------------------------
    def _tenant(self, request: web.Request) -> str:
        tenant = request.match_info["tenant"]
        if tenant not in MS_TENANTS:
            raise OAuthError("invalid_tenant", f"AADSTS90002: Tenant '{tenant}' not found.")
        return tenant

    async def ms_discovery(self, request: web.Request) -> web.Response:
        self.fake.count("microsoft.discovery")
        try:
            tenant = self._tenant(request)
        except OAuthError as exc:
            return _error("microsoft", exc)
        base = f"{self.fake.base_url}/{tenant}"
        return web.json_response({
            "issuer": self._issuer("microsoft"), "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
            "userinfo_endpoint": f"{self.fake.base_url}/oidc/userinfo", "jwks_uri": f"{base}/discovery/v2.0/keys",
            "response_types_supported": ["code", "id_token", "code id_token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "tenant_region_scope": None, "cloud_instance_name": "microsoftonline.com"})

    async def ms_authorize(self, request: web.Request) -> web.Response:
        try:
            self._tenant(request)
        except OAuthError as exc:
            return web.Response(status=400, text=exc.description)
        return await self._authorize("microsoft", request)

    async def ms_token(self, request: web.Request) -> web.Response:
        try:
            tenant = self._tenant(request)
        except OAuthError as exc:
            return _error("microsoft", exc)
        return await self._token("microsoft", request, tenant)

    async def ms_devicecode(self, request: web.Request) -> web.Response:
        if failed := self._failure("microsoft.devicecode"):
            return failed
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        try:
            self._tenant(request)
            client = self.fake.client("microsoft", form.get("client_id", ""), None, token_call=False)
            scopes = form.get("scope", "").split()
            if not scopes:
                raise OAuthError("invalid_request", "AADSTS900144: The request body must contain 'scope'.")
            device = self.fake.start_device(client, scopes)
        except OAuthError as exc:
            return _error("microsoft", exc)
        uri = f"{self.fake.base_url}/devicelogin"
        return web.json_response({
            "user_code": device.user_code, "device_code": device.device_code, "verification_uri": uri,
            "expires_in": int(device.expires_at - time.time() + 0.5), "interval": device.interval,
            "message": f"To sign in, use a web browser to open the page {uri} and enter the code "
                       f"{device.user_code} to authenticate."})

    async def device_page(self, request: web.Request) -> web.Response:
        return web.Response(content_type="text/html", text="<h1>Enter code</h1><p>Tests approve with "
                            "oauth.approve_device(user_code).</p>")

    async def ms_userinfo(self, request: web.Request) -> web.Response:
        self.fake.count("microsoft.userinfo")
        token = self.fake.bearer(request.headers.get("Authorization"))
        if token is None or token.resource != "graph":
            return web.json_response({"error": {"code": "InvalidAuthenticationToken",
                                                "message": "Access token validation failure."}}, status=401)
        return web.json_response({"sub": _sub(token.user), "name": "Owner Example", "email": token.user,
                                  "given_name": "Owner", "family_name": "Example"})
