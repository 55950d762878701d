"""Token-endpoint calls per turn on an OAuth account (issue 37): a turn that reads mail and the calendar of a
signed-in Google account must cost no request to the token endpoint while the access token is valid, and
one refresh once it is not. Also what asking for the token costs each time (a store read and a decrypt).

The servers are the test suite's fakes (tests/support/): the authorization server counting requests per
endpoint, the XOAUTH2-only IMAP/SMTP and Google's CalDAV behind its bearer check, over TLS on 127.0.0.1;
the clients are Anyy's own (`gateway.services.accounts`, `AccountTokens` on a SQLite store), driven through
the email and calendar tools as a turn calls them.

    .venv/bin/python bench/account_turn_tokens.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from email.message import EmailMessage
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.config import parse_config
from gateway.services.accounts import account_services
from tests.support.account_signin import SECRET_ENV
from tests.support.context import RecordingContext
from tests.support.google_caldav import GoogleCalDAV
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_host import FakeHost
from tests.support.oauth_http import OAuthRoutes
from tests.support.oauth_mail import start_oauth_mail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool
from toolsets.calendar import calendar_list
from toolsets.email import email_get, email_search

TURNS = 20
USER = "bench@gmail.example"


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> str:
    return str(await tool.call(ctx, tool.args_model.model_validate(args)))


async def turn(ctx: RecordingContext, uid: int) -> None:
    """What one turn about the owner's day does: search the inbox, read a message, list today's events."""
    await call(email_search, ctx, subject="Agenda")
    await call(email_get, ctx, uid=uid)
    await call(calendar_list, ctx, start="2026-12-07", end="2026-12-08")


def token_calls(oauth: OAuthFake) -> int:
    return oauth.calls["google.token"]  # one per request to the token endpoint, whatever its grant type


async def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="anyy-bench-"))
    (tmp / "ca").mkdir()
    ca = FakeCA.create(tmp / "ca")
    os.environ.update(ca.environ() | {"ANYY_SECRET_KEY": KEY, SECRET_ENV: GOOGLE_CLIENT_SECRET})
    host = FakeHost(ca.server_context())
    oauth = OAuthFake()
    OAuthRoutes(oauth).add_to(host.app)
    caldav = GoogleCalDAV(oauth, tmp / "caldav")
    caldav.add_routes(host.app)
    oauth.base_url = host.start()
    stack = AsyncExitStack()
    mail = start_oauth_mail(host, oauth, stack)
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "ann@example.org", USER, "Agenda"
    message.set_content("Items for Monday.\n")
    uid = await asyncio.to_thread(mail.deliver, USER, message.as_bytes())
    cfg = parse_config({"store": {"path": str(tmp / "anyy.db")}, "accounts": {
        "personal": account("google", oauth, mail, caldav_url=caldav.url)}})
    cfg.data_dir = tmp / "data"
    store = await cfg.new_store().open()
    services = account_services(cfg, store)
    accounts = services["accounts"]
    await signed_in(accounts, oauth, "personal", "google", USER)
    ctx = RecordingContext(store=store, services=services)
    try:
        oauth.reset()
        started = time.perf_counter()
        for _ in range(TURNS):
            await turn(ctx, uid)
        per_turn = (time.perf_counter() - started) / TURNS
        valid = token_calls(oauth)
        lookups = []
        for _ in range(200):
            t0 = time.perf_counter()
            await accounts.token("personal", "mail")
            lookups.append(time.perf_counter() - t0)
        # The access token runs out: the next turn refreshes, the one after it does not.
        oauth.access_lifetime = 3600
        await services["calendar"].aclose()
        await services["email"].aclose()
        services = account_services(cfg, store)  # a restarted resident: new connections, so new logins
        ctx = RecordingContext(store=store, services=services)
        await store.run(lambda db: db.execute("UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))
        before = token_calls(oauth)
        await turn(ctx, uid)
        after_expiry = token_calls(oauth) - before
        await turn(ctx, uid)
        next_turn = token_calls(oauth) - before - after_expiry
    finally:
        await services["calendar"].aclose()
        await services["email"].aclose()
        await store.close()
        host.run(stack.aclose())
        host.stop()
    print(f"turns: {TURNS} (email_search + email_get + calendar_list each), {per_turn * 1000:.0f} ms per turn")
    print(f"token-endpoint requests while the access token is valid: {valid}")
    print(f"token-endpoint requests in the first turn after it expired: {after_expiry}; in the turn after: {next_turn}")
    print(f"AccountTokens.token() while valid: median {statistics.median(lookups) * 1e6:.0f} us, "
          f"p95 {sorted(lookups)[int(len(lookups) * 0.95)] * 1e6:.0f} us (200 calls)")


if __name__ == "__main__":
    asyncio.run(main())
