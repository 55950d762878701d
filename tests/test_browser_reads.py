"""Reading a page sends nothing: while no approved action runs, the owner's browser sends only GET and
HEAD. A page that submits a form to another site on load, POSTs with fetch, sends a beacon or opens a
WebSocket reaches nothing, starts no worker, and its snapshot says what it tried. An approved click
sends what it causes, and nothing once it has ended. Real Chromium, local sites."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest

from connectors.browser import Browser, GuardProxy, PageState, launch, reads
from connectors.browser.reads import SendGate
from connectors.web import Guard
from tests.fixtures.browser_site import BrowserSite

OWNER = "console:owner"
TRIED = {"form", "fetch", "put", "beacon", "ws"}


async def refused_when(browser: Browser, done: Callable[[PageState], bool]) -> PageState:
    """The page's state once `done` holds of its refusals (a page acts on its own time), at most 15 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while True:
        state, _ = await browser.snapshot(OWNER)
        if done(state):
            return state
        assert loop.time() < deadline, "\n".join(r.describe() for r in state.refused)
        await asyncio.sleep(0.1)


def via(state: PageState) -> set[str]:
    return {r.url.rsplit("via=", 1)[-1] for r in state.refused if r.sent}


def tried_all(state: PageState) -> bool:
    """Whether /acts has tried everything: its sends, and its worker (which may not start at all)."""
    return via(state) >= TRIED and any(r.sent == "a worker" for r in state.refused)


async def test_a_page_that_only_is_read_sends_nothing_to_another_site(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    await browser.navigate(OWNER, browser_site.url("/cookie", host="127.0.0.2"))  # the owner's cookie there
    await browser.navigate(OWNER, browser_site.url("/acts"))
    state = await refused_when(browser, tried_all)
    assert browser_site.sunk == []
    # the blocked form left the page where it was
    assert (state.url, state.title) == (browser_site.url("/acts"), "Just reading")
    sink = browser_site.url("/sink", host="127.0.0.2")
    lines = {r.describe() for r in state.refused}
    assert f"this page tried to send a form to {sink}?via=form: blocked" in lines, lines
    assert f"this page tried to send a beacon to {sink}?via=beacon: blocked" in lines, lines
    assert any(line.startswith("this page tried to open a WebSocket to ws://") for line in lines), lines
    # Reading on (a snapshot, a scroll) still sends nothing.
    await browser.scroll(OWNER, "down")
    assert browser_site.sunk == []


async def test_an_approved_click_sends_what_it_causes_and_nothing_after_it_ends(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    url = browser_site.url("/acts")
    await browser.navigate(OWNER, url)
    await refused_when(browser, tried_all)
    _, snap = await browser.snapshot(OWNER)
    later = next(e for e in snap.elements.values() if e.name == "Later")
    await browser.act(OWNER, url, "click", later)  # its onclick POSTs: what the owner approved
    assert browser_site.sunk == [("POST", "late")]
    # The same request from the page's own script, once the action has ended: blocked.
    await browser._owners[OWNER].page.evaluate("document.querySelector('button').onclick()")
    await refused_when(browser, lambda s: "late" in via(s))
    assert browser_site.sunk == [("POST", "late")]


async def test_the_guard_proxy_refuses_a_write_it_sees_unless_the_gate_is_open(browser_site: BrowserSite) -> None:
    """What the browser's own routing does not see arrives at the proxy, when in plain text (http, ws://)."""
    gate = SendGate()
    proxy = GuardProxy(Guard(allow_private=True), gate.refuses)
    await proxy.start()
    sink = browser_site.url("/sink", host="127.0.0.2")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{sink}?via=proxy", data=b"x", proxy=proxy.url) as shut:
                assert shut.status == 403 and "reading a page sends nothing" in await shut.text()
            async with http.get(f"{sink}?via=proxy-get", proxy=proxy.url) as read:
                assert read.status == 204
            with gate.opened():
                async with http.post(f"{sink}?via=proxy-open", data=b"x", proxy=proxy.url) as opened:
                    assert opened.status == 204
    finally:
        await proxy.aclose()
    assert browser_site.sunk == [("GET", "proxy-get"), ("POST", "proxy-open")]
    [refused] = proxy.refusals_since(0)
    assert refused.describe() == f"this page tried to send a POST request to {sink}?via=proxy: blocked"


async def test_a_page_cannot_start_a_shared_worker_whose_requests_the_gate_would_not_see(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    await browser.navigate(OWNER, browser_site.url("/acts"))
    page = browser._owners[OWNER].page
    assert await page.evaluate("typeof SharedWorker") == "undefined"
    framed = "(() => { const f = document.createElement('iframe'); document.body.appendChild(f); " \
             "return typeof f.contentWindow.SharedWorker; })()"
    assert await page.evaluate(framed) == "undefined"


async def test_a_page_over_https_starts_no_worker_and_opens_no_websocket(
        make_browser: Callable[..., Browser], browser_tls_site: BrowserSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over https the proxy sees only tunnels; a worker's requests may escape Playwright's routing (Chromium
    gaps: playwright #27376, #32355) and its wss:// always does (it reached /sink before workers were
    switched off). So a page starts no worker, from any frame, and opens no WebSocket."""
    monkeypatch.setattr(launch, "FLAGS", (*launch.FLAGS, "--ignore-certificate-errors"))  # the local CA's site
    site = browser_tls_site
    browser = make_browser()
    await browser.navigate(OWNER, site.url("/workers"))
    tried = ("a worker", "a worker", "a worker", "a WebSocket", "a WebSocket", "a peer connection", "a service worker",
             "a POST request", "a beacon")  # the last three from a sandboxed srcdoc frame
    state = await refused_when(browser, lambda s: sorted(r.sent for r in s.refused) == sorted(tried))
    sink = site.url("/sink", host="127.0.0.2")
    lines = {r.describe() for r in state.refused}
    assert f"this page tried to open a WebSocket to {sink.replace('https', 'wss', 1)}?via=ws: blocked" in lines, lines
    assert any(line.startswith("this page tried to start a worker from blob:https://") for line in lines), lines
    # The page's last line, a GET, does arrive (a read may send it); nothing else ever does.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while ("GET", "read-done") not in site.sunk:
        assert loop.time() < deadline, site.sunk
        await asyncio.sleep(0.05)
    page = browser._owners[OWNER].page
    assert await page.evaluate("typeof WebSocket === 'function' && typeof Worker === 'function'")  # as the page sees it
    assert site.sunk == [("GET", "read-done")]


async def test_a_page_that_sends_all_the_time_does_not_keep_an_approved_action_open(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    """The gate shuts a short fixed time after the action's navigations ended, not once the page falls
    quiet: a beacon every 0.3 s, started by the approved click, is refused from then on."""
    browser = make_browser()  # timeout_s = 10
    url = browser_site.url("/beacons")
    await browser.navigate(OWNER, url)
    _, snap = await browser.snapshot(OWNER)
    start = next(e for e in snap.elements.values() if e.name == "Start")
    loop = asyncio.get_running_loop()
    began = loop.time()
    await browser.act(OWNER, url, "click", start)
    assert loop.time() - began < reads.AFTER_ACTION_S + 3  # not timeout_s

    def beacons(state: PageState) -> list[int]:
        return sorted(int(n.rsplit("-", 1)[-1]) for n in via(state) if n.startswith("beacon-"))

    state = await refused_when(browser, lambda s: len(beacons(s)) >= 3)
    sent = [int(v.rsplit("-", 1)[-1]) for method, v in browser_site.sunk]
    assert sent and max(sent) < min(beacons(state)), (sent, beacons(state))  # in the window only, then none
