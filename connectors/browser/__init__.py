"""The browser connector: Playwright over the system Chromium, every request through the web guard.

`proxy` is the forward proxy that applies the guard to each connection a page opens; `reads` the gate
that lets a page send only GET and HEAD unless an approved action runs; `forms` what a submitting action
is bound to; `snapshot` turns Playwright's ARIA snapshot into text with element refs; `driver` owns the
browser process, one context per owner (its profile on disk: `profiles`), and the actions.
"""

from connectors.browser.driver import (
    Browser,
    BrowserError,
    BrowserSettings,
    PageState,
    StaleTarget,
    find_executable,
)
from connectors.browser.forms import Form
from connectors.browser.proxy import GuardProxy, Refusal
from connectors.browser.snapshot import ACTIONABLE, TYPABLE, Element, Snapshot

__all__ = [
    "ACTIONABLE",
    "TYPABLE",
    "Browser",
    "BrowserError",
    "BrowserSettings",
    "Element",
    "Form",
    "GuardProxy",
    "PageState",
    "Refusal",
    "Snapshot",
    "StaleTarget",
    "find_executable",
]
