"""HTTP mode: Slack posts events and interactions to `POST /slack/events` on our own aiohttp server.

Bolt verifies the signature and timestamp (401 otherwise) and answers `url_verification`; this module
only moves requests between aiohttp and the Bolt app.
"""

from __future__ import annotations

import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class HttpReceiver:
    """An aiohttp server in front of a Bolt app."""

    def __init__(self, app: AsyncApp, listen: str, port: int) -> None:
        self._app = app
        self._listen = listen
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # the bound port (the configured one, or the one picked for port 0)

    async def start(self) -> None:
        """Listen; raises OSError when the address cannot be bound."""
        web_app = web.Application()
        web_app.router.add_post(EVENTS_PATH, self._handle)
        self._runner = web.AppRunner(web_app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._listen, self._port)
        try:
            await site.start()
        except OSError:
            await self.stop()
            raise
        self.port = int(self._runner.addresses[0][1])
        log.info("slack_http_listening listen=%s port=%d path=%s", self._listen, self.port, EVENTS_PATH)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.port = None

    async def _handle(self, request: web.Request) -> web.Response:
        response = await self._app.async_dispatch(await to_bolt_request(request))
        if response.status >= 400:
            log.info("slack_http_rejected status=%d retry=%s", response.status,
                     request.headers.get("X-Slack-Retry-Num", "0"))
        return await to_aiohttp_response(response)
