"""What the browser's send gate costs a page load (issue 39): `Browser.navigate` of a local page with 60
images and 10 scripts, with the gate (every request routed through Playwright to Python, which also
turns Chromium's HTTP cache off) and without it (the routing not installed), in alternated rounds.

    .venv/bin/python bench/browser_reads.py [--rounds 15] [--images 60] [--no-store]

Prints the median and p90 of each, a fresh page per load (`about:blank` first) so each load is whole.
Needs the system Chromium, as the browser tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from connectors.browser import Browser, BrowserSettings, driver, find_executable
from connectors.web import Guard

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def site(images: int, cache: str) -> web.Application:
    body = "".join(f'<img src="/i/{n}.png">' for n in range(images))
    body += "".join(f'<script src="/s/{n}.js"></script>' for n in range(10))
    page = f"<!doctype html><title>Many</title><h1>Many parts</h1>{body}"
    app = web.Application()
    app.add_routes([
        web.get("/", lambda r: web.Response(text=page, content_type="text/html")),
        web.get("/i/{n}.png", lambda r: web.Response(body=PNG, content_type="image/png",
                                                      headers={"Cache-Control": cache})),
        web.get("/s/{n}.js", lambda r: web.Response(text="void 0;", content_type="text/javascript",
                                                     headers={"Cache-Control": cache})),
        web.get("/blank", lambda r: web.Response(text="<title>blank</title>", content_type="text/html")),
    ])
    return app


async def loads(browser: Browser, url: str, blank: str) -> float:
    await browser.navigate("bench", blank)
    t0 = time.perf_counter()
    await browser.navigate("bench", url)
    return time.perf_counter() - t0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--no-store", action="store_true",
                        help="the parts say Cache-Control: no-store, so neither load may use Chromium's cache")
    args = parser.parse_args()
    runner = web.AppRunner(site(args.images, "no-store" if args.no_store else "max-age=3600"), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    url, blank = f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/blank"
    executable = find_executable()
    assert executable, "no Chromium found"
    gated_install = driver.install

    async def not_installed(*_: Any) -> None:
        return None

    times: dict[str, list[float]] = {"gate": [], "no gate": []}
    with tempfile.TemporaryDirectory() as tmp:
        browsers = {}
        for name, install in (("gate", gated_install), ("no gate", not_installed)):
            driver.install = install  # type: ignore[assignment]  # each browser's context is made now
            browsers[name] = Browser(Guard(allow_private=True), BrowserSettings(executable, Path(tmp) / name,
                                                                                 timeout_s=30))
            await loads(browsers[name], url, blank)  # start Chromium, warm up
        driver.install = gated_install
        for _ in range(args.rounds):
            for name, browser in browsers.items():
                times[name].append(await loads(browser, url, blank))
        for browser in browsers.values():
            await browser.aclose()
    await runner.cleanup()
    for name, values in times.items():
        values.sort()
        p90 = values[int(0.9 * (len(values) - 1))]
        print(f"{name:8} median {statistics.median(values) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms"
              f"   ({len(values)} loads of 1 page + {args.images} images + 10 scripts)")


if __name__ == "__main__":
    asyncio.run(main())
