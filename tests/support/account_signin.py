"""Accounts pointed at the fake authorization servers (tests/support/oauth_provider.py), and a test
playing the owner's browser: open the printed link, follow the authorization server's redirect to
wherever it points (the loopback listener of `anyy accounts add`), or stop there to paste it."""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx

from tests.support.oauth_provider import GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET, MS_CLIENT_ID, OAuthFake

SECRET_ENV = "ANYY_TEST_GOOGLE_SECRET"
LINK = re.compile(r"https://\S+")


def endpoints(provider: Literal["google", "microsoft"], base: str, tenant: str = "common") -> dict[str, Any]:
    """The [accounts.NAME] endpoint overrides that point an account at the fake."""
    if provider == "google":
        return {"authorize_url": f"{base}/o/oauth2/v2/auth", "token_url": f"{base}/token",
                "revoke_url": f"{base}/revoke", "userinfo_url": f"{base}/v1/userinfo"}
    root = f"{base}/{tenant}/oauth2/v2.0"
    return {"authorize_url": f"{root}/authorize", "token_url": f"{root}/token",
            "device_code_url": f"{root}/devicecode", "userinfo_url": f"{base}/oidc/userinfo",
            "graph_url": f"{base}/v1.0"}


def account_fields(provider: Literal["google", "microsoft"], base: str, services: list[str] | None = None,
                   **more: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"provider": provider,
                              "client_id": GOOGLE_CLIENT_ID if provider == "google" else MS_CLIENT_ID}
    if provider == "google":
        fields["client_secret_env"] = SECRET_ENV
    if services is not None:
        fields["services"] = services
    return fields | endpoints(provider, base) | more


def account_toml(name: str, provider: Literal["google", "microsoft"], base: str,
                 services: list[str] | None = None, **more: Any) -> str:
    """An `[accounts.NAME]` table for the config file."""
    lines = [f"[accounts.{name}]"]
    for key, value in account_fields(provider, base, services, **more).items():
        rendered = "[" + ", ".join(f'"{v}"' for v in value) + "]" if isinstance(value, list) else \
            (str(value) if isinstance(value, int) else f'"{value}"')
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


def secret_env() -> dict[str, str]:
    return {SECRET_ENV: GOOGLE_CLIENT_SECRET}


def link_in(text: str) -> str | None:
    """The authorization link a sign-in printed (the first https address)."""
    found = LINK.search(text)
    return found.group(0) if found else None


async def consent(link: str) -> str:
    """Open the authorization link as the browser would; returns where the server redirects it (the
    loopback address holding the code and state)."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(link)
    assert response.status_code == 302, (response.status_code, response.text[:200])
    return response.headers["location"]


async def land(address: str) -> httpx.Response:
    """Follow the redirect to the loopback listener, as a browser on the same machine does."""
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        return await http.get(address)


def forget_devices(oauth: OAuthFake) -> None:
    """Drop the device authorizations earlier tests left pending (the fake is the session's), so that
    `oauth.wait_device()` answers with the one this test's sign-in asks for."""
    with oauth.lock:
        oauth.devices.clear()
