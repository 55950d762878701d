"""Starting Chromium: the switches Anyy adds to Playwright's, and features switched off on top of its own.

One feature is switched off for the send gate (`reads`): `IsolateSandboxedIframes`. A sandboxed `srcdoc`
iframe (`<iframe sandbox="allow-scripts" srcdoc=...>`) gets a process of its own, and its first scripts run
before Playwright has attached to that process: neither Playwright's routing nor the script that switches
workers and WebSockets off (`channels`) sees them, so a page only read could POST over https from such a
frame. In the page's own process it is a frame like any other, and both see it from its first line.

Chromium reads only the last `--disable-features` switch, and Playwright passes one of its own (features it
needs off to drive the browser), so ours must repeat Playwright's list. That list depends on the Playwright
version: a short first launch asks the browser for its command line, once per executable and process.
"""

from __future__ import annotations

from typing import Any

# Chromium's own background traffic off; WebRTC may not send UDP around the proxy (it would bypass the guard);
# no shared workers, whose requests Playwright's routing does not see (the send gate, `reads`).
FLAGS = ("--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-shared-workers",
         "--disable-default-apps", "--disable-extensions", "--dns-prefetch-disable", "--disable-dev-shm-usage",
         "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
         "--webrtc-ip-handling-policy=disable_non_proxied_udp")
DISABLED_FEATURES = ("IsolateSandboxedIframes",)
_PLAYWRIGHTS: dict[str, list[str]] = {}  # executable -> the features Playwright's launch switches off


async def launch(chromium: Any, executable: str, headless: bool, timeout_ms: float) -> Any:
    """Launch `executable` through Playwright's `chromium` with `FLAGS` and `DISABLED_FEATURES`."""
    if executable not in _PLAYWRIGHTS:
        _PLAYWRIGHTS[executable] = await _playwrights_disabled(chromium, executable, timeout_ms)
    disabled = ",".join([*_PLAYWRIGHTS[executable], *DISABLED_FEATURES])
    return await chromium.launch(executable_path=executable, headless=headless, timeout=timeout_ms,
                                 args=[*FLAGS, f"--disable-features={disabled}"])


async def _playwrights_disabled(chromium: Any, executable: str, timeout_ms: float) -> list[str]:
    # Chromium answers Browser.getBrowserCommandLine only when started with --enable-automation.
    probe = await chromium.launch(executable_path=executable, headless=True, timeout=timeout_ms,
                                  args=["--enable-automation"])
    try:
        session = await probe.new_browser_cdp_session()
        arguments: list[str] = (await session.send("Browser.getBrowserCommandLine"))["arguments"]
    finally:
        await probe.close()
    last = [a for a in arguments if a.startswith("--disable-features=")][-1:]
    return [feature for a in last for feature in a.partition("=")[2].split(",") if feature]
