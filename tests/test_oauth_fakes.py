"""The issue-37 stand-ins answer the real client libraries as Google and Microsoft document, and refuse
what the providers refuse (a fake that accepts everything would let every other issue-37 test pass)."""

from __future__ import annotations

import secrets
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

import google.auth.transport.requests
import google.oauth2.credentials
import httpx
import msal
import pytest

from tests.support.oauth_provider import (
    GOOGLE_CALENDAR,
    GOOGLE_CLIENT_ID,
    GOOGLE_CLIENT_SECRET,
    GOOGLE_MAIL,
    GOOGLE_USER,
    GRAPH_CALENDARS,
    GRAPH_USER,
    MS_CLIENT_ID,
    MS_USER,
    OUTLOOK_IMAP,
    OUTLOOK_SMTP,
    OAuthFake,
    s256,
)
from tests.support.tls_ca import FakeCA

OUTLOOK = [OUTLOOK_IMAP, OUTLOOK_SMTP]
GRAPH = [GRAPH_CALENDARS, GRAPH_USER]
REDIRECT = "http://127.0.0.1:53117/"


def msal_app(oauth: OAuthFake, tenant: str = "common") -> msal.PublicClientApplication:
    return msal.PublicClientApplication(MS_CLIENT_ID, authority=f"{oauth.base_url}/{tenant}",
                                        instance_discovery=False)


def redirected(http: httpx.Client, url: str) -> dict[str, str]:
    """Follow the authorize URL as a browser would, up to the redirect to the loopback address."""
    resp = http.get(url)
    assert resp.status_code == 302, resp.text
    location = resp.headers["location"]
    assert location.startswith("http://127.0.0.1:") or location.startswith("http://localhost")
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def google_code(oauth: OAuthFake, http: httpx.Client, verifier: str, *, offline: bool = True, prompt: str = "consent",
                scopes: tuple[str, ...] = (GOOGLE_MAIL, GOOGLE_CALENDAR, "openid", "email")) -> str:
    state = secrets.token_urlsafe(8)
    params = {"client_id": GOOGLE_CLIENT_ID, "redirect_uri": REDIRECT, "response_type": "code",
              "scope": " ".join(scopes), "state": state, "code_challenge": s256(verifier),
              "code_challenge_method": "S256", **({"access_type": "offline"} if offline else {}),
              **({"prompt": prompt} if prompt else {})}
    answer = redirected(http, str(httpx.URL(f"{oauth.base_url}/o/oauth2/v2/auth", params=params)))
    assert answer["state"] == state
    return answer["code"]


def google_redeem(oauth: OAuthFake, http: httpx.Client, code: str, verifier: str, **extra: str) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier,
            "client_id": GOOGLE_CLIENT_ID, "client_secret": GOOGLE_CLIENT_SECRET, **extra}
    return http.post(f"{oauth.base_url}/token", data=form)


@pytest.fixture
def http(fake_ca: FakeCA) -> Any:
    with httpx.Client(timeout=10) as client:  # trusts the CA through SSL_CERT_FILE, as httpx does by default
        yield client


def test_a_client_that_does_not_trust_the_private_ca_is_refused(oauth: OAuthFake) -> None:
    with httpx.Client(trust_env=False) as stranger, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY"):
        stranger.get(f"{oauth.base_url}/.well-known/openid-configuration")


def test_google_code_with_pkce_then_refresh_keeps_the_refresh_token(oauth: OAuthFake, http: httpx.Client) -> None:
    verifier = secrets.token_urlsafe(48)
    body = google_redeem(oauth, http, google_code(oauth, http, verifier), verifier).json()
    assert body["token_type"] == "Bearer" and body["refresh_token"].startswith("1//")
    assert set(body["scope"].split()) == {GOOGLE_MAIL, GOOGLE_CALENDAR, "openid", "email"}
    token = oauth.bearer(body["access_token"])
    assert token is not None and token.user == GOOGLE_USER
    info = http.get(f"{oauth.base_url}/v1/userinfo", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert info.json()["email"] == GOOGLE_USER

    # google-auth refreshes through requests (REQUESTS_CA_BUNDLE); Google answers without a new refresh token
    creds = google.oauth2.credentials.Credentials(
        None, refresh_token=body["refresh_token"], token_uri=f"{oauth.base_url}/token", client_id=GOOGLE_CLIENT_ID,
        client_secret=GOOGLE_CLIENT_SECRET)
    creds.refresh(google.auth.transport.requests.Request())
    assert creds.token != body["access_token"] and creds.refresh_token == body["refresh_token"]
    creds.refresh(google.auth.transport.requests.Request())  # the same refresh token still works
    assert oauth.calls["google.token.authorization_code"] == 1
    assert oauth.calls["google.token.refresh_token"] == 2


def test_google_refuses_a_wrong_verifier_a_replayed_code_and_a_missing_secret(oauth: OAuthFake,
                                                                                http: httpx.Client) -> None:
    verifier = secrets.token_urlsafe(48)
    code = google_code(oauth, http, verifier)
    wrong = google_redeem(oauth, http, code, secrets.token_urlsafe(48))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert google_redeem(oauth, http, code, verifier).json()["error"] == "invalid_grant"  # single use

    code = google_code(oauth, http, verifier)
    no_secret = google_redeem(oauth, http, code, verifier, client_secret="")
    assert no_secret.status_code == 401 and no_secret.json()["error"] == "invalid_client"
    other_redirect = google_redeem(oauth, http, google_code(oauth, http, verifier), verifier,
                                   redirect_uri="http://127.0.0.1:1/")
    assert other_redirect.json()["error"] == "invalid_grant"


def test_google_refresh_tokens_need_offline_access_and_consent_again(oauth: OAuthFake, http: httpx.Client) -> None:
    oauth.users["google"] = "reconsent@gmail.example"
    verifier = secrets.token_urlsafe(48)
    body = google_redeem(oauth, http, google_code(oauth, http, verifier, offline=False), verifier).json()
    assert "access_token" in body and "refresh_token" not in body
    # consented before: Google gives a new refresh token only when the consent screen is shown again
    body = google_redeem(oauth, http, google_code(oauth, http, verifier, prompt=""), verifier).json()
    assert "refresh_token" not in body
    body = google_redeem(oauth, http, google_code(oauth, http, verifier, prompt="consent"), verifier).json()
    assert body["refresh_token"]


def test_google_granular_consent_and_denial(oauth: OAuthFake, http: httpx.Client) -> None:
    oauth.withhold = {GOOGLE_CALENDAR}
    verifier = secrets.token_urlsafe(48)
    body = google_redeem(oauth, http, google_code(oauth, http, verifier), verifier).json()
    assert GOOGLE_CALENDAR not in body["scope"].split() and GOOGLE_MAIL in body["scope"].split()

    oauth.deny = True
    params = {"client_id": GOOGLE_CLIENT_ID, "redirect_uri": REDIRECT, "response_type": "code", "scope": GOOGLE_MAIL,
              "state": "s1"}
    answer = redirected(http, str(httpx.URL(f"{oauth.base_url}/o/oauth2/v2/auth", params=params)))
    assert answer == {"error": "access_denied", "error_description": answer["error_description"], "state": "s1"}
    stranger = http.get(f"{oauth.base_url}/o/oauth2/v2/auth", params={**params, "redirect_uri": "https://evil.example/"})
    assert stranger.status_code == 400 and "redirect_uri_mismatch" in stranger.text


def test_google_revocation_ends_the_grant(oauth: OAuthFake, http: httpx.Client) -> None:
    issued = oauth.issue("google", [GOOGLE_MAIL])
    assert http.post(f"{oauth.base_url}/revoke", data={"token": issued.refresh_token}).status_code == 200
    assert oauth.bearer(issued.access_token) is None
    refused = http.post(f"{oauth.base_url}/token", data={
        "grant_type": "refresh_token", "refresh_token": issued.refresh_token, "client_id": GOOGLE_CLIENT_ID,
        "client_secret": GOOGLE_CLIENT_SECRET})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert http.post(f"{oauth.base_url}/revoke", data={"token": "nope"}).json()["error"] == "invalid_token"


def test_msal_device_flow_then_one_token_per_resource_with_rotation(oauth: OAuthFake) -> None:
    app = msal_app(oauth)
    flow = app.initiate_device_flow(scopes=OUTLOOK)
    assert flow["user_code"] and flow["interval"] == 1 and flow["verification_uri"].startswith(oauth.base_url)
    result: dict[str, Any] = {}
    poller = threading.Thread(target=lambda: result.update(app.acquire_token_by_device_flow(flow)))
    poller.start()
    assert oauth.wait_device() == flow["user_code"]
    oauth.approve_device(flow["user_code"])
    poller.join(30)
    assert "access_token" in result, result
    outlook = oauth.bearer(result["access_token"])
    assert outlook is not None and outlook.resource == "outlook" and outlook.user == MS_USER
    assert result["id_token_claims"]["preferred_username"] == MS_USER

    # consent covered Outlook only: a Graph token needs the user's consent first
    graph = app.acquire_token_by_refresh_token(result["refresh_token"], scopes=GRAPH)
    assert graph["error"] == "invalid_grant" and "AADSTS65001" in graph["error_description"]


def test_msal_consent_for_both_resources_then_tokens_per_resource_and_rotation(oauth: OAuthFake) -> None:
    app = msal_app(oauth)
    flow = app.initiate_device_flow(scopes=OUTLOOK + GRAPH)
    oauth.approve_device(oauth.wait_device())
    first = app.acquire_token_by_device_flow(flow)
    token = oauth.bearer(first["access_token"])
    # one resource per token: the first in the request, and msal sends its scopes as a set, in any order
    assert token is not None and {token.resource} < {"outlook", "graph"}

    graph = app.acquire_token_by_refresh_token(first["refresh_token"], scopes=GRAPH)
    assert "access_token" in graph, graph
    token = oauth.bearer(graph["access_token"])
    assert token is not None and token.resource == "graph" and GRAPH_CALENDARS in token.scopes
    assert graph["refresh_token"] != first["refresh_token"]
    reused = app.acquire_token_by_refresh_token(first["refresh_token"], scopes=OUTLOOK)
    assert reused["error"] == "invalid_grant"  # rotated: the used refresh token died
    both = app.acquire_token_by_refresh_token(graph["refresh_token"], scopes=OUTLOOK + GRAPH)
    assert both["error"] == "invalid_scope" and "AADSTS28000" in both["error_description"]
    outlook = app.acquire_token_by_refresh_token(graph["refresh_token"], scopes=OUTLOOK)
    token = oauth.bearer(outlook["access_token"])
    assert token is not None and token.resource == "outlook" and OUTLOOK_SMTP in token.scopes
    assert oauth.calls["microsoft.token.refresh_token"] == 4


def test_msal_auth_code_with_pkce(oauth: OAuthFake, http: httpx.Client) -> None:
    app = msal_app(oauth, "organizations")
    flow = app.initiate_auth_code_flow(OUTLOOK, redirect_uri="http://localhost:53118")
    result = app.acquire_token_by_auth_code_flow(flow, redirected(http, flow["auth_uri"]))
    assert "access_token" in result, result
    assert oauth.bearer(result["access_token"]) is not None

    flow = app.initiate_auth_code_flow(GRAPH, redirect_uri="http://localhost:53118")
    answer = redirected(http, flow["auth_uri"])
    flow["code_verifier"] = secrets.token_urlsafe(48)
    wrong = app.acquire_token_by_auth_code_flow(flow, answer)
    assert wrong["error"] == "invalid_grant"


def test_msal_refuses_an_unknown_tenant(oauth: OAuthFake) -> None:
    with pytest.raises(ValueError, match="double check your tenant"):
        msal_app(oauth, "no-such-tenant")


def test_device_grant_pending_slow_down_declined_expired(oauth: OAuthFake, http: httpx.Client) -> None:
    url = f"{oauth.base_url}/common/oauth2/v2.0"

    def start() -> dict[str, Any]:
        return dict(http.post(f"{url}/devicecode", data={"client_id": MS_CLIENT_ID, "scope": " ".join(OUTLOOK)}).json())

    def poll(device: dict[str, Any]) -> httpx.Response:
        return http.post(f"{url}/token", data={"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                                               "client_id": MS_CLIENT_ID, "device_code": device["device_code"]})

    oauth.device_interval = 5
    device = start()
    first = poll(device)
    assert first.status_code == 400 and first.json()["error"] == "authorization_pending"
    assert poll(device).json()["error"] == "slow_down"  # polled again within the interval
    assert oauth.devices[device["device_code"]].interval == 10  # RFC 8628 3.5: 5 s more from now on
    oauth.decline_device(device["user_code"])
    assert poll(device).json()["error"] == "authorization_declined"  # a final answer, however soon

    oauth.device_lifetime = 0
    assert poll(start()).json()["error"] == "expired_token"
    secret = http.post(f"{url}/token", data={"grant_type": "refresh_token", "refresh_token": "x",
                                             "client_id": MS_CLIENT_ID, "client_secret": "s"})
    assert secret.status_code == 401 and "AADSTS700025" in secret.json()["error_description"]


def test_device_grant_declined(oauth: OAuthFake, http: httpx.Client) -> None:
    app = msal_app(oauth)
    flow = app.initiate_device_flow(scopes=OUTLOOK)
    oauth.decline_device(oauth.wait_device())
    assert app.acquire_token_by_device_flow(flow)["error"] == "authorization_declined"


def test_expired_and_revoked_tokens_are_not_live(oauth: OAuthFake) -> None:
    issued = oauth.issue("microsoft", [*GRAPH, "offline_access"])
    assert oauth.bearer(f"Bearer {issued.access_token}") is not None
    oauth.expire_access_tokens()
    assert oauth.bearer(issued.access_token) is None
    again = oauth.issue("microsoft", [*OUTLOOK, "offline_access"], user="second@contoso.example")
    assert oauth.revoke("second@contoso.example") == 1
    assert oauth.bearer(again.access_token) is None


def test_an_outage_answers_once_then_recovers(oauth: OAuthFake) -> None:
    app = msal_app(oauth)
    issued = oauth.issue("microsoft", [*GRAPH, "offline_access", "openid", "profile"])
    oauth.fail_next("microsoft.token", 503)
    with pytest.raises(msal.exceptions.MsalServiceError, match="503"):  # msal raises on a 5xx
        app.acquire_token_by_refresh_token(issued.refresh_token, scopes=GRAPH)
    # msal holds back the same request for 5 s after a 5xx (its throttling); a new process would not
    assert "access_token" in msal_app(oauth).acquire_token_by_refresh_token(issued.refresh_token, scopes=GRAPH)
    assert oauth.calls["microsoft.token"] == 2
