"""The dashboard's accounts page: each account's state, address and services, and the command that
reconnects one that needs it. It reads states only: no token is decrypted for it, none is shown."""

from __future__ import annotations

from aiohttp import web

from gateway.accounts import AccountState, account_tokens
from gateway.dashboard.auth import PREFIX
from gateway.dashboard.context import gateway_of, render


async def accounts(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    cfg = gw.config
    states: list[AccountState] = []
    if cfg.accounts:
        service = gw.services.get("accounts") or account_tokens(cfg, gw.store)
        states = await service.states()
    password = []  # [email] / [calendar]: accounts signed in with a password from an environment variable
    if cfg.email is not None:
        password.append({"name": cfg.email.name, "service": "email", "address": cfg.email.from_address,
                         "where": f"{cfg.email.imap_host} / {cfg.email.smtp_host}", "env": cfg.email.password_env})
    if cfg.calendar is not None:
        password.append({"name": cfg.calendar.name, "service": "calendar", "address": cfg.calendar.username,
                         "where": cfg.calendar.url, "env": cfg.calendar.password_env})
    return render(request, "accounts.html", states=states, password=password)


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get(f"{PREFIX}/accounts", accounts, name="accounts")
