"""The dashboard's web server: aiohttp in the resident process's event loop, Jinja2 pages.

Every request but the login passes the session guard; every POST also the CSRF check. Responses carry a
strict Content-Security-Policy (no script at all, styles only from our stylesheet) and are never cached.
aiohttp's access log is off: the login request's URL carries the token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.dashboard import accounts, actions, hooks, overview, pages, records
from gateway.dashboard.auth import COOKIE, LOGIN_PATH, PREFIX, WebSessions, load_or_create_token, token_matches
from gateway.dashboard.context import GATEWAY, SESSION, SESSIONS, STYLESHEET, TEMPLATES, TOKEN, see_other, templates

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _refusal(status: int, text: str) -> web.Response:
    """A plain page for requests without access: it says how to get in and nothing else."""
    return web.Response(status=status, text=f"{text}\n", content_type="text/plain")


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # aiohttp's own 404/405 pages
        exc.headers.update(_HEADERS)
        raise
    response.headers.update(_HEADERS)
    return response


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """No session, no page; a POST also needs the session's CSRF token; nothing but GET and POST. A
    webhook delivery proves itself with its own secret instead (`gateway.dashboard.hooks`)."""
    if (request.path == LOGIN_PATH and request.method == "GET") or request.path.startswith(hooks.HOOKS_PREFIX):
        return await handler(request)
    session = request.app[SESSIONS].get(request.cookies.get(COOKIE))
    if session is None:
        return _refusal(401, "Not logged in. Run `anyy dashboard url` on the Anyy machine and open the link it prints.")
    if request.method == "POST":
        form = await request.post()
        csrf = form.get("csrf")
        if not isinstance(csrf, str) or not session.csrf_ok(csrf):
            log.warning("dashboard_csrf_refused path=%s", request.path)
            return _refusal(403, "This form is stale or did not come from the dashboard; reload the page and "
                                 "try again.")
    elif request.method not in ("GET", "HEAD"):
        return _refusal(405, "Only GET and POST.")
    request[SESSION] = session
    return await handler(request)


async def login(request: web.Request) -> web.StreamResponse:
    """Exchange the token for a session cookie, then drop the token from the address bar.

    The answer is a page that moves on by itself (meta refresh), not a redirect: a SameSite=Strict cookie
    is withheld from every request of a redirect chain that another site started (the link clicked in
    a web chat), while a navigation the page itself starts is same-site."""
    if not token_matches(request.query.get("token", ""), request.app[TOKEN]):
        log.warning("dashboard_login_refused")
        return _refusal(403, "Wrong or missing token. Run `anyy dashboard url` and open the link it prints.")
    sid, _ = request.app[SESSIONS].create()
    response = web.Response(text=request.app[TEMPLATES].get_template("login.html").render(next=f"{PREFIX}/"),
                            content_type="text/html")
    # Served beyond this machine it must sit behind TLS (a proxy that speaks plain HTTP to us): the
    # cookie is then Secure, so a browser never sends it over plain HTTP.
    secure = request.secure or request.app[GATEWAY].config.dashboard.allow_remote
    response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", path=PREFIX, secure=secure)
    log.info("dashboard_login")
    return response


async def stylesheet(request: web.Request) -> web.Response:
    return web.Response(body=request.app[STYLESHEET], content_type="text/css")


async def slash(request: web.Request) -> web.Response:
    return see_other(f"{PREFIX}/")


def build_app(gateway: Gateway, token: str) -> web.Application:
    app = web.Application(middlewares=[security_headers, guard], client_max_size=64 * 1024)
    app[GATEWAY] = gateway
    app[SESSIONS] = WebSessions()
    app[TEMPLATES] = templates(gateway)
    app[TOKEN] = token
    app[STYLESHEET] = resources.files("gateway.dashboard").joinpath("static/style.css").read_bytes()
    app.router.add_get(LOGIN_PATH, login)
    app.router.add_get(PREFIX, slash)
    app.router.add_get(f"{PREFIX}/", overview.overview)
    app.router.add_get(f"{PREFIX}/pairing", overview.pairing)
    app.router.add_get(f"{PREFIX}/static/style.css", stylesheet)
    pages.add_routes(app.router)
    actions.add_routes(app.router)
    records.add_routes(app.router)
    accounts.add_routes(app.router)
    hooks.add_routes(app.router)
    return app


class Dashboard:
    """Serves the dashboard for a started Gateway on `[dashboard] listen`."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.config = gateway.config.dashboard
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # the bound port (useful with port 0)

    async def start(self) -> None:
        """Bind and serve. Raises OSError when the address is taken."""
        token = await asyncio.to_thread(load_or_create_token, self.gateway.config.data_dir)
        runner = web.AppRunner(build_app(self.gateway, token), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self.config.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = _bound_port(runner, self.config.port)
        log.info("dashboard_started listen=%s:%s", self.config.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _bound_port(runner: web.AppRunner, configured: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    return configured

