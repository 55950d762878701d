"""The browser driver: Playwright for Python over the system Chromium, one page per owner.

One Chromium process per resident, started on first use (Playwright is imported then, not before) and
closed after `idle_s` without use. Each owner gets an isolated browser context whose cookies and local
storage are kept in the data directory (`profiles/<owner>/state.json`) and restored on the next start,
and its own `GuardProxy`, through which every request of that owner's pages goes. Downloads are refused.

Acting on an element (`act`) happens only on the page state it was asked for: the page still at the
same URL and the ref still naming an element of the same role and name, else `StaleTarget` and nothing
is done. This is what lets an approval hours later click exactly what the owner saw, or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.browser.forms import FORM_OF, Form
from connectors.browser.launch import launch
from connectors.browser.navigations import Navigations
from connectors.browser.profiles import read_state, write_state
from connectors.browser.proxy import GuardProxy, Refusal
from connectors.browser.reads import SendGate, install
from connectors.browser.snapshot import Element, Snapshot, parse
from connectors.web.guard import BlockedURL, Guard

log = logging.getLogger(__name__)

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
LAUNCH_TIMEOUT_S = 60.0  # a cold start on a busy machine takes seconds; a page timeout may be shorter
FULL_SNAPSHOT = 1_000_000  # when looking a ref up, the whole page counts, not the part shown


class BrowserError(Exception):
    """Something the model can read and act on: a refused URL, a page that did not load."""


class StaleTarget(BrowserError):
    """The page or element an action was meant for is not there any more; nothing was done."""


class _NotStarted(Exception):
    """Stands for Playwright's error type until Playwright is imported."""


def find_executable(configured: str = "") -> str | None:
    """The configured browser, else the first Chromium found on PATH."""
    if configured:
        return configured if Path(configured).is_file() else shutil.which(configured)
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


@dataclass(frozen=True)
class BrowserSettings:
    executable: str
    profiles: Path  # one directory per owner below it
    headless: bool = True
    timeout_s: float = 20.0
    idle_s: float = 300.0
    snapshot_chars: int = 20_000


@dataclass(frozen=True)
class PageState:
    """Where the page is after an operation, and what the guard refused meanwhile."""

    url: str
    title: str
    status: int | None = None
    refused: list[Refusal] = field(default_factory=list)
    downloads_refused: int = 0  # files the page tried to download (downloads are off)


@dataclass
class _Owner:
    context: Any
    page: Any
    proxy: GuardProxy
    state_path: Path
    navigations: Navigations
    gate: SendGate
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    page_since: float = 0.0  # time.monotonic() when the page now open began loading


class Browser:
    """The browser service. Every method takes the owner's user key; `aclose()` at exit."""

    def __init__(self, guard: Guard, settings: BrowserSettings) -> None:
        self.guard = guard
        self.settings = settings
        self._pw: Any = None
        self._browser: Any = None
        self._Error: type[BaseException] = _NotStarted
        self._owners: dict[str, _Owner] = {}
        self._start_lock = asyncio.Lock()
        self._busy = 0
        self._last_used = time.monotonic()
        self._idle: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    async def _start(self) -> None:
        from playwright.async_api import Error, async_playwright  # heavy: only once the browser is used

        self._Error = Error
        self._pw = await async_playwright().start()
        try:
            self._browser = await launch(self._pw.chromium, self.settings.executable, self.settings.headless,
                                         max(self.settings.timeout_s, LAUNCH_TIMEOUT_S) * 1000)
        except Error as exc:
            await self._pw.stop()
            self._pw = None
            raise BrowserError(f"the browser {self.settings.executable} did not start: {_first_line(exc)}") from None
        log.info("browser_started executable=%s headless=%s", self.settings.executable, self.settings.headless)

    async def _owner(self, key: str, *, open_: bool = True) -> _Owner | None:
        """The owner's live page, opened when `open_` (starting the browser first if needed). A page that
        closed itself (`window.close()`) or a browser that crashed counts as no page open."""
        owner = self._owners.get(key)
        if owner is not None and (owner.page.is_closed() or not self._browser.is_connected()):
            await self._discard(key)
            owner = None
        if owner is not None or not open_:
            return owner
        async with self._start_lock:
            if self._browser is None:
                await self._start()
            if key in self._owners:
                return self._owners[key]
            state_path = self.settings.profiles / _dirname(key) / "state.json"
            gate = SendGate()
            proxy = GuardProxy(self.guard, gate.refuses, connect_timeout_s=self.settings.timeout_s)
            await proxy.start()
            state = await asyncio.to_thread(read_state, state_path)
            context = await self._browser.new_context(
                proxy={"server": proxy.url}, accept_downloads=False, service_workers="block", storage_state=state,
                viewport={"width": 1280, "height": 900})
            context.set_default_timeout(self.settings.timeout_s * 1000)
            await install(context, gate, proxy.record)
            page = await context.new_page()
            owner = self._owners[key] = _Owner(context, page, proxy, state_path, Navigations(page), gate)
            return owner

    async def _discard(self, key: str) -> None:
        """Forget a dead page: its context, its proxy, and the browser too when that is gone."""
        async with self._start_lock:
            owner = self._owners.pop(key, None)
            if owner is not None:
                with contextlib.suppress(Exception):
                    await owner.context.close()
                await owner.proxy.aclose()
            crashed = self._browser is not None and not self._browser.is_connected()
        log.warning("browser_page_lost crashed=%s", crashed)
        if crashed:
            await self.aclose()

    async def aclose(self) -> None:
        """Save every owner's cookies and close the browser (it starts again on next use)."""
        if self._idle is not None:
            self._idle.cancel()
        async with self._start_lock:
            owners, self._owners = list(self._owners.values()), {}
            for owner in owners:
                with contextlib.suppress(Exception):  # a crashed browser has nothing left to save
                    await self._save(owner)
                await owner.proxy.aclose()
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    await self._browser.close()
                self._browser = None
            if self._pw is not None:
                await self._pw.stop()
                self._pw = None
                log.info("browser_closed owners=%d", len(owners))

    async def _save(self, owner: _Owner) -> None:
        state = await owner.context.storage_state()
        await asyncio.to_thread(write_state, owner.state_path, state)

    def _schedule_idle_close(self) -> None:
        self._last_used = time.monotonic()
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(self.settings.idle_s, self._idle_close)

    def _idle_close(self) -> None:
        if self._busy == 0 and self._browser is not None:
            self._closing = asyncio.create_task(self.aclose())

    async def _run(self, key: str, fn: Callable[[_Owner], Awaitable[Any]], *, open_: bool = True) -> Any:
        """Run `fn` on the owner's page under its lock; Playwright errors become BrowserErrors."""
        self._busy += 1
        try:
            owner = await self._owner(key, open_=open_)
            if owner is None:
                raise StaleTarget("no page is open in the browser (it closes when idle and at a restart); "
                                  "nothing was done. Navigate to the page (again) first.")
            async with owner.lock:
                try:
                    return await fn(owner)
                except self._Error as exc:
                    raise BrowserError(_first_line(exc)) from None
                finally:
                    with contextlib.suppress(Exception):
                        await self._save(owner)
        finally:
            self._busy -= 1
            self._schedule_idle_close()

    @property
    def running(self) -> bool:
        """Whether the browser process is up (it starts on first use and closes when idle)."""
        return self._browser is not None

    # -- reading ----------------------------------------------------------------------------------

    def current_url(self, key: str) -> str | None:
        """The owner's page URL now, or None when no page is open."""
        owner = self._owners.get(key)
        return None if owner is None else str(owner.page.url)

    async def navigate(self, key: str, url: str) -> PageState:
        """Load `url` in the owner's page. BrowserError when the guard refuses it (or a redirect hop) or
        it does not load."""
        try:
            await self.guard.check(url)
        except BlockedURL as exc:
            raise BrowserError(f"{url}: refused: {exc}") from None

        async def go(owner: _Owner) -> PageState:
            since = owner.page_since = time.monotonic()
            try:
                response = await owner.page.goto(url, wait_until="load")
            except self._Error as exc:
                refused = owner.proxy.refusals_since(since)
                if refused:
                    raise BrowserError(f"{url}: refused: {refused[0].reason}") from None
                raise BrowserError(f"{url}: did not load: {_first_line(exc)}") from None
            state = await _state(owner, since, response)
            refused_page = next((r for r in state.refused if r.url == state.url and not r.sent), None)
            if refused_page is not None:
                raise BrowserError(f"{url}: refused at {refused_page.url}: {refused_page.reason}")
            log.info("browser_navigate status=%s refused=%d", state.status, len(state.refused))
            return state

        return await self._run(key, go)

    async def snapshot(self, key: str) -> tuple[PageState, Snapshot]:
        """The owner's page as text with refs (see `snapshot.parse`)."""

        async def take(owner: _Owner) -> tuple[PageState, Snapshot]:
            raw = await owner.page.aria_snapshot(mode="ai")
            # What the page was refused since it began loading: a page acts on its own time, after load too.
            return await _state(owner, owner.page_since, None), parse(raw, self.settings.snapshot_chars)

        return await self._run(key, take, open_=False)

    async def element(self, key: str, ref: str) -> Element:
        """The element `ref` names on the owner's page now (StaleTarget when there is none)."""

        async def find(owner: _Owner) -> Element:
            return await _element(owner, ref)

        return await self._run(key, find, open_=False)

    async def form(self, key: str, ref: str | None, submitting: bool = False) -> Form | None:
        """The form a click on `ref` (or Enter in it, when `submitting`; the focused element when `ref` is
        None) would submit now, else None."""

        async def find(owner: _Owner) -> Form | None:
            return await _form(owner, ref, submitting)

        return await self._run(key, find, open_=False)

    async def screenshot(self, key: str) -> tuple[PageState, bytes]:
        async def shoot(owner: _Owner) -> tuple[PageState, bytes]:
            return await _state(owner, None, None), await owner.page.screenshot(type="png")

        return await self._run(key, shoot, open_=False)

    # -- moving (no effect outside the page) -------------------------------------------------------

    async def scroll(self, key: str, direction: str) -> PageState:
        """Scroll the page one screen "up" or "down" (or to its "top" / "bottom")."""
        script = {"down": "window.scrollBy(0, window.innerHeight * 0.8)",
                  "up": "window.scrollBy(0, -window.innerHeight * 0.8)", "top": "window.scrollTo(0, 0)",
                  "bottom": "window.scrollTo(0, document.body.scrollHeight)"}[direction]

        async def move(owner: _Owner) -> PageState:
            await owner.page.evaluate(script)
            return await _state(owner, None, None)

        return await self._run(key, move, open_=False)

    async def back(self, key: str) -> PageState:
        async def go_back(owner: _Owner) -> PageState:
            since = owner.page_since = time.monotonic()
            response = await owner.page.go_back(wait_until="load")
            return await _state(owner, since, response)

        return await self._run(key, go_back, open_=False)

    # -- acting (what approvals guard) -------------------------------------------------------------

    async def act(self, key: str, url: str, action: str, element: Element | None = None, text: str = "",
                  submit: bool = False, form: Form | None = None) -> PageState:
        """Click `element`, fill it with `text` (then press Enter when `submit`), or press the key `text`
        ("press"), on the owner's page — only while the page is still at `url`, the element still has
        the role and name it had and submits the `form` it was asked with; StaleTarget (nothing done)
        otherwise. The form submission the action causes must be that form too (`Form.allows`)."""

        async def do(owner: _Owner) -> PageState:
            page = owner.page
            if page.url != url:
                raise StaleTarget(f"the page is now {page.url}, not {url} where this was asked; nothing was done")
            since = owner.page_since = time.monotonic()
            if element is not None:
                current = await _element(owner, element.ref)
                if (current.role, current.name) != (element.role, element.name):
                    raise StaleTarget(f"{element.ref} is now {current.describe()}, not {element.describe()}; "
                                      "nothing was done")
            if form is not None and (now := await _form(owner, element.ref if element else None, True)) != form:
                what = element.describe() if element else "the focused field"
                raise StaleTarget(f"the form behind {what} changed since this was asked (it "
                                  f"{now.describe() if now else 'submits nothing now'}); nothing was done")
            with owner.gate.opened(form):  # the action may send what it causes, until its navigations settled
                if element is not None:
                    target = page.locator(f"aria-ref={element.ref}")
                    if action == "click":
                        await target.click()
                    else:
                        await target.fill(text)
                        if submit:
                            await target.press("Enter")
                else:
                    await page.keyboard.press(text)
                with contextlib.suppress(self._Error):  # a click that starts no navigation is just done
                    await page.wait_for_load_state("load", timeout=self.settings.timeout_s * 1000)
                await owner.navigations.settle(since, self.settings.timeout_s)
                await owner.gate.quiet()
            log.info("browser_act action=%s submit=%s", action, submit)
            return await _state(owner, since, None)

        return await self._run(key, do, open_=False)


async def _element(owner: _Owner, ref: str) -> Element:
    raw = await owner.page.aria_snapshot(mode="ai")
    found = parse(raw, FULL_SNAPSHOT).elements.get(ref)
    if found is None:
        raise StaleTarget(f"{ref} is not an element one can act on on the page now ({owner.page.url}); "
                          "take a new snapshot and use a ref it prints")
    return found


async def _form(owner: _Owner, ref: str | None, submitting: bool) -> Form | None:
    """The form `ref` (None: the focused element, which a key press acts on) submits, or None."""
    if ref is None:
        found = await owner.page.evaluate(f"(submitting) => ({FORM_OF})(document.activeElement, submitting)",
                                          submitting)
    else:
        found = await owner.page.locator(f"aria-ref={ref}").evaluate(FORM_OF, submitting)
    return Form.from_json(found) if found else None


async def _state(owner: _Owner, since: float | None, response: Any) -> PageState:
    refused = owner.proxy.refusals_since(since) if since is not None else []
    downloads = owner.navigations.downloads_since(since) if since is not None else 0
    return PageState(url=str(owner.page.url), title=await owner.page.title(),
                     status=None if response is None else response.status, refused=refused,
                     downloads_refused=downloads)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _dirname(key: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:40]
    return f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
