"""`Navigations.settle`: an action's outcome waits for the browser's own late reports (a link answering
with a file aborts its navigation first and reports the download a moment later), but never hangs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from connectors.browser import navigations
from connectors.browser.navigations import Navigations


class Request:
    def __init__(self, navigation: bool = True) -> None:
        self.navigation = navigation

    def is_navigation_request(self) -> bool:
        return self.navigation


class Page:
    """Stands in for Playwright's page: only its event emitter, driven by the test."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[[Any], None]] = {}

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        self.handlers[event] = handler

    def emit(self, event: str, arg: Any = None) -> None:
        self.handlers[event](arg)


def aborted_navigation() -> tuple[Page, Navigations, float]:
    """A page whose navigation request just failed, as Chromium reports a click that became a download."""
    page = Page()
    navs = Navigations(page)
    since = time.monotonic()
    request = Request()
    page.emit("request", request)
    page.emit("requestfailed", request)
    return page, navs, since


async def test_a_download_reported_after_the_aborted_navigation_is_counted() -> None:
    page, navs, since = aborted_navigation()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, page.emit, "download")
    await navs.settle(since, timeout_s=5)
    assert navs.downloads_since(since) == 1


async def test_settle_waits_for_a_navigation_in_flight_and_ignores_other_requests() -> None:
    page = Page()
    navs = Navigations(page)
    since = time.monotonic()
    request = Request()
    page.emit("request", Request(navigation=False))  # an image: never waited for
    page.emit("request", request)
    asyncio.get_running_loop().call_later(0.05, page.emit, "requestfinished", request)
    t0 = time.monotonic()
    await navs.settle(since, timeout_s=5)
    assert 0.04 <= time.monotonic() - t0 < 1 and navs.downloads_since(since) == 0


async def test_an_aborted_navigation_without_a_download_costs_a_bounded_wait(monkeypatch) -> None:
    monkeypatch.setattr(navigations, "DOWNLOAD_REPORT_S", 0.1)
    _, navs, since = aborted_navigation()
    t0 = time.monotonic()
    await navs.settle(since, timeout_s=5)
    assert 0.09 <= time.monotonic() - t0 < 1 and navs.downloads_since(since) == 0
