"""What a page's navigations came to, so an action reports its outcome only once the browser has said it.

A click on a link that answers with a file does not navigate: Chromium aborts the navigation request and
reports the download a moment later, and on a busy machine that report can come after the click has
returned. `Navigations` listens to one page's navigation requests and downloads; `settle(since)` waits
until every navigation started since then has ended and every aborted one has had its chance to report a
download, bounded so that an aborted navigation that was no download costs a short wait, not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

DOWNLOAD_REPORT_S = 2.0  # how long an aborted navigation may take to report its download


@dataclass
class _Nav:
    at: float
    request: Any
    failed: bool | None = None  # None while the request is in flight


class Navigations:
    """One page's recent navigation requests and refused downloads (downloads are off)."""

    def __init__(self, page: Any) -> None:
        self._navs: deque[_Nav] = deque(maxlen=64)
        self.downloads: deque[float] = deque(maxlen=64)  # time.monotonic() of each refused download
        self._changed = asyncio.Event()
        page.on("request", self._started)
        page.on("requestfinished", lambda request: self._ended(request, failed=False))
        page.on("requestfailed", lambda request: self._ended(request, failed=True))
        page.on("download", self._downloaded)

    def downloads_since(self, since: float) -> int:
        return sum(at >= since for at in self.downloads)

    async def settle(self, since: float, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the navigations started at or after `since` have ended and
        each aborted one is matched by a download, or `DOWNLOAD_REPORT_S` has passed since it ended."""
        deadline = time.monotonic() + timeout_s
        while True:
            recent = [nav for nav in self._navs if nav.at >= since]
            in_flight = any(nav.failed is None for nav in recent)
            unreported = sum(bool(nav.failed) for nav in recent) > self.downloads_since(since)
            if not (in_flight or unreported):
                return
            if not in_flight:  # only a download report is awaited now: a shorter bound
                deadline = min(deadline, time.monotonic() + DOWNLOAD_REPORT_S)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    def _started(self, request: Any) -> None:
        if request.is_navigation_request():
            self._navs.append(_Nav(time.monotonic(), request))
            self._changed.set()

    def _ended(self, request: Any, *, failed: bool) -> None:
        for nav in reversed(self._navs):
            if nav.request is request:
                nav.failed = failed
                self._changed.set()
                return

    def _downloaded(self, _download: Any) -> None:
        self.downloads.append(time.monotonic())
        self._changed.set()
