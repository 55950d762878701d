"""OAuth 2.0 bearer authentication for httpx (RFC 6750), with the token from an account's `TokenProvider`.

Used by the CalDAV client for Google Calendar and by the Microsoft Graph calendar client. Each request
asks the provider for the token (it answers from its cache while the token is valid, so this costs no
token-endpoint call). A 401 asks once more, naming the refused token (the provider refreshes it, or
hands over the one another resident has just refreshed) and repeats the request only when the token
changed; otherwise the 401 stands and the caller says so in one line.
`SignInNeeded` from the provider passes through.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Generator

import httpx

from connectors.oauth_token import TokenProvider

log = logging.getLogger(__name__)


class BearerAuth(httpx.Auth):
    """`Authorization: Bearer <token>` on every request, the token from `token`; async clients only."""

    requires_request_body = True  # a request repeated after a 401 sends its body again

    def __init__(self, token: TokenProvider) -> None:
        self._token = token

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("BearerAuth needs an httpx.AsyncClient (the token provider is async)")
        yield request  # pragma: no cover - makes this a generator, as httpx requires

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self._token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        fresh = await self._token(refused=token)
        if fresh != token:
            log.info("bearer token refused; retrying with a newer one host=%s", request.url.host)
            request.headers["Authorization"] = f"Bearer {fresh}"
            yield request
