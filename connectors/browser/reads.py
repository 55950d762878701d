"""What reading a page may send: GET and HEAD requests, nothing else, unless an approved action runs.

A page runs its scripts while it is only read, and they could act with the owner's cookies: a form that
submits itself on load, a `fetch` POST, `navigator.sendBeacon`, a WebSocket. So the owner's browser
context has a `SendGate`, open only while an approved click, type or press runs (`Browser.act`); while it
is shut, every request of another method is refused before it leaves the browser, and so is every
WebSocket. Two places enforce it, because neither sees everything:

- in the browser (`install`): Playwright routes every request of the context, https included, to us
  with its method and kind; pages' WebSockets go through Playwright's WebSocket routing. A refused form
  submission is answered `204 No Content`, which navigates nowhere, so the page stays as it was read.
- in the guard proxy (`GuardProxy`): a plain-http request arrives with its method and headers, so a
  write or a WebSocket upgrade that the browser did not route is refused there.

What neither would see (a worker's requests over https, its `wss://`) is not gated but switched off:
pages get no workers and no WebSockets at all (`channels`).

Each refusal is recorded with what the page tried to send, so the page's snapshot can say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from connectors.browser.channels import switch_off
from connectors.browser.forms import Form
from connectors.browser.proxy import Refusal

log = logging.getLogger(__name__)

READ_METHODS = frozenset({"GET", "HEAD"})
REASON = "reading a page sends nothing"
FORM_CHANGED = "the form is not the one the owner approved (its target or hidden fields changed)"
QUIET_S = 0.5  # an action has ended once its page sent no request for this long (as Playwright's networkidle)
AFTER_ACTION_S = 2.0  # ... or this long after its navigations ended, however busy the page (a beacon every 0.3 s)


class SendGate:
    """Shut unless an approved action runs: then the page may send what the action causes."""

    def __init__(self) -> None:
        self._actions = 0
        self._last_request = 0.0  # time.monotonic() of the newest request routed
        self.form: Form | None = None  # the form the running action was approved to submit, if any

    async def quiet(self, timeout_s: float = AFTER_ACTION_S) -> None:
        """Wait until no request was routed for `QUIET_S`, counted from now at the earliest (at most
        `timeout_s`): a request an action's script starts reaches the route a moment after the click
        returned, and must still find the gate open. The bound is short and fixed: a page that sends all
        the time would otherwise keep the gate open for as long as it liked."""
        start = time.monotonic()
        deadline = start + timeout_s
        while (left := max(start, self._last_request) + QUIET_S - time.monotonic()) > 0:
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(min(left, deadline - time.monotonic()))

    @property
    def is_open(self) -> bool:
        return self._actions > 0

    @contextlib.contextmanager
    def opened(self, form: Form | None = None) -> Iterator[None]:
        self._actions += 1
        self.form = form
        try:
            yield
        finally:
            self._actions -= 1
            self.form = None

    def checks_form(self, request_url: str, method: str, navigation: bool) -> bool:
        """Whether a request may be a submission of the approved form that needs checking (`Form.allows`):
        a navigation of the form's method, to its target (a POST form: any POST navigation)."""
        form = self.form
        if form is None or not navigation or method.upper() != form.method:
            return False
        return form.method != "GET" or request_url.split("?", 1)[0] == form.action.split("?", 1)[0]

    def saw_request(self) -> None:
        self._last_request = time.monotonic()

    def refuses(self, method: str, upgrade: bool = False) -> bool:
        """Whether a request of `method` (a WebSocket handshake when `upgrade`) is refused now."""
        return not self.is_open and (upgrade or method.upper() not in READ_METHODS)


def what_is_sent(method: str, resource_type: str, navigation: bool) -> str:
    """What a refused request was, as the snapshot names it: "a form", "a beacon", "a POST request"."""
    if navigation:
        return "a form"
    if resource_type == "ping":  # navigator.sendBeacon and <a ping>
        return "a beacon"
    if resource_type == "websocket":
        return "a WebSocket"
    return f"a {method.upper()} request"


async def install(context: Any, gate: SendGate, record: Callable[[Refusal], None]) -> None:
    """Route every request and WebSocket of the Playwright `context` through `gate`, and switch off what
    neither the gate nor the proxy would see (`channels`); `record` each refusal."""

    async def on_request(route: Any, request: Any) -> None:
        gate.saw_request()
        navigation = request.is_navigation_request()
        reason = REASON if gate.refuses(request.method) else None
        if reason is None and gate.form is not None and gate.checks_form(request.url, request.method,
                                                                                  navigation):
            content_type = await request.header_value("content-type") or ""
            if not gate.form.allows(request.url, request.method, content_type, request.post_data_buffer):
                reason = FORM_CHANGED
        if reason is None:
            await route.continue_()
            return
        record(Refusal(request.url, reason, time.monotonic(),
                       what_is_sent(request.method, request.resource_type, navigation)))
        log.info("browser_send_refused method=%s kind=%s form_changed=%s", request.method, request.resource_type,
                 reason == FORM_CHANGED)
        if navigation:
            await route.fulfill(status=204)
        else:
            await route.abort("blockedbyclient")

    async def on_websocket(ws: Any) -> None:
        if not gate.refuses("GET", True):
            ws.connect_to_server()
            return
        record(Refusal(ws.url, REASON, time.monotonic(), "a WebSocket"))
        log.info("browser_send_refused method=GET kind=websocket")
        await ws.close()

    await switch_off(context, record)
    await context.route("**/*", on_request)
    await context.route_web_socket("**/*", on_websocket)
