"""Anyy's own receiver for Telegram webhook pushes: the secret before the body, and a capped body.

python-telegram-bot's webhook server (tornado) reads a request's whole body, up to 100 MB, before its
handler looks at the secret token, so anyone who can reach the port can make the process buffer that
much. This receiver, on aiohttp.web, checks the `X-Telegram-Bot-Api-Secret-Token` header first (in
constant time) and answers 403 without reading a byte of the body; an authenticated body is refused
past BODY_LIMIT, whether declared in Content-Length or streamed. The decoded `Update` goes on the
Application's update queue, the same hand-off PTB's own server uses: the `HandoffQueue` returns from
`put()` only once the update was handled, so the 200 still follows the gateway's durable `receive`,
and a failed one answers 500 so that Telegram delivers it again.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging

from aiohttp import web
from telegram import Bot, Update
from telegram.ext import ExtBot

from gateway.surfaces.telegram.handoff import UpdateNotHandled

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
BODY_LIMIT = 1_000_000  # bytes; a real update (4096-character text, entities, a keyboard) is a few KB
_LINGER_S = 2.0  # after refusing, the unread rest of a body is read and dropped this long, then closed


class WebhookReceiver:
    """An HTTP server on `listen:port` taking Telegram's POSTs at `path`."""

    def __init__(self, bot: Bot, queue: asyncio.Queue[object], secret: str, *, listen: str, port: int,
                 path: str) -> None:
        self._bot = bot
        self._queue = queue
        self._secret = secret.encode()
        self._listen = listen
        self._port = port
        self._path = path or "/"
        self._runner: web.AppRunner | None = None

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        """Listen; raises RuntimeError naming the address when it is taken."""
        app = web.Application(client_max_size=BODY_LIMIT)
        app.router.add_post(self._path, self._post)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, lingering_time=_LINGER_S)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._listen, self._port).start()
        except OSError as exc:
            await runner.cleanup()
            raise RuntimeError(f"telegram: cannot listen for the webhook on {self._listen}:{self._port} "
                               f"({exc.strerror or exc})") from None
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening; requests being handled finish first."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("telegram_webhook_refused reason=secret remote=%s", request.remote)
            return web.Response(status=403, text="wrong or missing secret token")
        if request.content_length is not None and request.content_length > BODY_LIMIT:
            return _too_large(request)
        try:
            body = await request.read()  # stops at client_max_size: never more than BODY_LIMIT in memory
        except web.HTTPRequestEntityTooLarge:
            return _too_large(request)
        try:
            update = Update.de_json(json.loads(body), self._bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("telegram_webhook_bad_update error=%s", type(exc).__name__)
            update = None
        if update is None:
            return web.Response(status=400, text="not a Telegram update")
        if isinstance(self._bot, ExtBot):
            self._bot.insert_callback_data(update)  # what PTB's own server does (arbitrary callback data)
        try:
            await self._queue.put(update)
        except UpdateNotHandled:
            return web.Response(status=500, text="not handled; deliver it again")
        return web.Response(status=200)


def _too_large(request: web.Request) -> web.Response:
    log.warning("telegram_webhook_refused reason=body_too_large length=%s", request.content_length)
    return web.Response(status=413, text=f"a webhook body is at most {BODY_LIMIT} bytes")
