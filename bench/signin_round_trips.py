"""Round trips of each sign-in flow of `anyy accounts add` (issue 37): the HTTP requests Anyy itself makes
to the authorization server, counted at the server, per endpoint, with the browser's own requests (the
authorize page) counted apart. Also the time Anyy's part takes once the owner has consented (exchange,
discovery, the second resource's token), over TLS on 127.0.0.1.

The servers are the test suite's fake Google and Microsoft (tests/support/oauth_provider.py), which
answer as the providers document; the clients are the real ones (httpx, msal over requests). The device
flow is approved before its first poll, so its poll count is the floor; each `authorization_pending`
adds one poll per `interval` (5 s at Microsoft).

    .venv/bin/python bench/signin_round_trips.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.accounts.grant import SignedIn
from gateway.accounts.providers import sign_in
from gateway.config.accounts import AccountConfig
from tests.support.account_signin import account_fields, consent, land, link_in, secret_env
from tests.support.oauth_host import FakeHost
from tests.support.oauth_http import OAuthRoutes
from tests.support.oauth_provider import OAuthFake
from tests.support.tls_ca import FakeCA

RUNS = 5
requests: Counter[str] = Counter()


@web.middleware
async def count(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> web.StreamResponse:
    browser = request.path.endswith("/authorize") or request.path.endswith("/auth")
    requests[("browser " if browser else "") + f"{request.method} {request.path.split('/', 2)[-1]}"] += 1
    return await handler(request)


async def one(fake: OAuthFake, provider: str, paste: bool, how: str) -> tuple[SignedIn, float]:
    cfg = AccountConfig.model_validate(account_fields(provider, fake.base_url))  # type: ignore[arg-type]
    lines: asyncio.Queue[str] = asyncio.Queue()
    pasted: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(sign_in(cfg, lines.put_nowait, paste=paste, pasted=lambda: pasted))
    if provider == "microsoft" and not paste:
        fake.approve_device(await asyncio.to_thread(fake.wait_device))
        started = time.perf_counter()  # msal polls once the interval (1 s here) has passed: not counted
    else:
        link = None
        while link is None:
            link = link_in(await lines.get())
        address = await consent(link)
        started = time.perf_counter()
        if how == "loopback":
            await land(address)
        else:
            pasted.set_result(address)
    signed = await task
    return signed, (time.perf_counter() - started) * 1000


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="anyy-bench-ca-"))
    ca = FakeCA.create(folder)
    os.environ.update(ca.environ() | secret_env())
    host = FakeHost(ca.server_context())
    fake = OAuthFake()
    host.app.middlewares.append(count)
    OAuthRoutes(fake).add_to(host.app)
    fake.base_url = host.start()
    print(f"per sign-in, mean of {RUNS}; ms: from consent (or approval) to the tokens in hand, median")
    try:
        for provider, paste, how in (("google", False, "loopback"), ("google", True, "paste"),
                                     ("microsoft", False, "device code"), ("microsoft", True, "paste")):
            times = []
            requests.clear()
            for _ in range(RUNS):
                with fake.lock:
                    fake.devices.clear()
                signed, ms = await one(fake, provider, paste, how)
                assert set(signed.grants) == {"mail", "calendar"}
                times.append(ms)
            mine = {k: v / RUNS for k, v in sorted(requests.items()) if not k.startswith("browser")}
            browser = sum(v for k, v in requests.items() if k.startswith("browser")) / RUNS
            detail = ", ".join(f"{k} {v:g}" for k, v in mine.items())
            print(f"{provider} {how}: Anyy {sum(mine.values()):g} requests ({detail}); browser {browser:g}; "
                  f"{sorted(times)[RUNS // 2]:.0f} ms")
    finally:
        host.stop()


if __name__ == "__main__":
    asyncio.run(main())
