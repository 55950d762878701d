"""What a page may not open at all: workers, WebSockets, WebTransport, WebRTC, deferred fetches.

The send gate (`reads`) sees a request either in Playwright's routing or, in plain text, in the guard
proxy. A worker's requests over https reach neither reliably (Playwright's routing misses some worker
requests in Chromium, nested workers' among them), a worker's `wss://` reaches neither at all (the proxy
sees an encrypted tunnel), and a WebSocket or a peer connection opened during an approved action would
go on sending after it ended, message by message, where no gate looks. So these are switched off for
every page, read or acted on, rather than gated: a script run in every new document of the context
(each frame, each popup, the first `about:blank` of a new iframe included, before any page script)
replaces their constructors with ones that throw, as a browser whose policy forbids them would.

A page that tries one is told so in its snapshot like any refused send ("this page tried to open a
WebSocket to wss://...: blocked"), through a binding the script keeps to itself (it takes it off the
page's global object before the page's own scripts run).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from connectors.browser.proxy import Refusal

log = logging.getLogger(__name__)

REASON = "pages get no workers, WebSockets or peer connections in this browser"
BINDING = "__anyyRefusedChannel"
# The global each stub replaces -> what the snapshot says the page tried ("a worker" is started, ...).
SWITCHED_OFF = {
    "Worker": "a worker", "SharedWorker": "a worker", "WebSocket": "a WebSocket", "WebSocketStream": "a WebSocket",
    "WebTransport": "a WebTransport session", "RTCPeerConnection": "a peer connection",
    "webkitRTCPeerConnection": "a peer connection", "fetchLater": "a deferred request",
}
SERVICE_WORKER = "a service worker"

_SCRIPT = """((switchedOff, serviceWorker) => {
  const report = globalThis[%(binding)s];
  delete globalThis[%(binding)s];
  const refusal = (name, sent) => (target) => {
    if (report) report(sent, String(target === undefined ? location.href : target).slice(0, 2000));
    return new DOMException(name + " is switched off in this browser", "SecurityError");
  };
  for (const [name, sent] of Object.entries(switchedOff)) {
    if (!(name in globalThis)) continue;
    const refuse = refusal(name, sent);
    Object.defineProperty(globalThis, name, {value: function (target) { throw refuse(target); },
                                             writable: true, configurable: true, enumerable: false});
  }
  if (globalThis.ServiceWorkerContainer) {
    const refuse = refusal("navigator.serviceWorker.register", serviceWorker);
    Object.defineProperty(ServiceWorkerContainer.prototype, "register", {
      value: function (target) { return Promise.reject(refuse(target)); }, writable: true, configurable: true});
  }
})(%(switched_off)s, %(service_worker)s);"""


async def switch_off(context: Any, record: Callable[[Refusal], None]) -> None:
    """Switch workers, WebSockets, WebTransport, WebRTC and `fetchLater` off in every document of the
    Playwright `context`; `record` each attempt."""

    def refused(_source: Any, sent: object, target: object) -> None:
        kinds = {*SWITCHED_OFF.values(), SERVICE_WORKER}
        what = sent if isinstance(sent, str) and sent in kinds else "a connection"  # the page can call this too
        record(Refusal(str(target)[:2000], REASON, time.monotonic(), what))
        log.info("browser_channel_refused kind=%s", what)

    await context.expose_binding(BINDING, refused)
    await context.add_init_script(_SCRIPT % {"binding": json.dumps(BINDING), "switched_off": json.dumps(SWITCHED_OFF),
                                             "service_worker": json.dumps(SERVICE_WORKER)})
