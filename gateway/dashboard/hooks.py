"""`POST /hooks/<name>`: webhook deliveries on the dashboard's listener (gateway/services/webhooks.py).

These requests carry no dashboard session: the guard lets them through to this handler, which checks the
webhook's own secret. The body is read here with its own limit (the dashboard's forms have a smaller one).
"""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.dashboard.context import GATEWAY
from gateway.services.webhooks import MAX_BODY, Verdict, WebhookService

log = logging.getLogger(__name__)

HOOKS_PREFIX = "/hooks/"

_TEXT = {
    Verdict.ACCEPTED: "accepted",
    Verdict.BAD_REQUEST: "bad delivery id",
    Verdict.NOT_FOUND: "no such webhook",
    Verdict.TOO_LARGE: f"the body is over {MAX_BODY // 1024} KB",
    Verdict.TOO_MANY: "too many deliveries; try again in a minute",
}


def _answer(verdict: Verdict) -> web.Response:
    headers = {"Retry-After": "60"} if verdict is Verdict.TOO_MANY else None
    return web.Response(status=int(verdict), text=_TEXT[verdict] + "\n", content_type="text/plain", headers=headers)


async def _body(request: web.Request) -> bytes | None:
    """The body, or None when it is over MAX_BODY (read no further than one byte past it)."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        return None
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def hook(request: web.Request) -> web.Response:
    service: WebhookService | None = request.app[GATEWAY].services.get("webhooks")
    if service is None:
        return _answer(Verdict.NOT_FOUND)
    body = await _body(request)
    if body is None:
        return _answer(Verdict.TOO_LARGE)
    try:
        verdict = await service.accept(request.match_info["name"], request.headers, body)
    except Exception:  # the store is down: the sender retries later, nothing was recorded as done
        log.exception("webhook_failed")
        return web.Response(status=503, text="try again later\n", content_type="text/plain")
    return _answer(verdict)


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post(HOOKS_PREFIX + "{name}", hook)
