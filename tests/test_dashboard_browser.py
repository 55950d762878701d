"""Issue 19 in a real browser: log in with the link `anyy dashboard url` prints, find email_send's policy
on the tools page, and approve a held email from the approvals page — exactly one message reaches the SMTP
server and the console's approval prompt is edited. Every page is screenshotted under the test's tmp folder.

The gateway (console surface, fake model, pymap + aiosmtpd) and the dashboard run in the test's event
loop; `anyy dashboard url` is the real command in a subprocess on the same data directory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from gateway.config import DashboardConfig
from store.approvals import Approvals
from tests.support.cli import anyy, write_config
from tests.test_email_e2e import held

OTHER_PAGES = ["toolsets", "automations", "sessions", "audit", "health", "pairing", "tasks", "memory", "skills"]
DESKTOP, PHONE = (1280, 1000), (390, 844)


async def until(browser, condition, timeout: float = 10):
    return await asyncio.to_thread(WebDriverWait(browser, timeout).until, condition)


async def shot(browser, folder: Path, name: str, size: tuple[int, int] = DESKTOP) -> Path:
    """Screenshot the whole page at `size`'s width (the window grows to the page's height)."""
    def take() -> bool:
        browser.set_window_size(*size)
        height = browser.find_element(By.TAG_NAME, "body").size["height"]
        browser.set_window_size(size[0], max(size[1], min(height + 120, 6000)))
        return browser.save_screenshot(str(folder / f"{name}.png"))

    assert await asyncio.to_thread(take), name
    return folder / f"{name}.png"


async def test_login_find_policy_and_approve_an_email_in_a_browser(
        browser, dashboard_config, email_config, start_console, start_dashboard, model, smtp_recorder, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    dashboard_config()  # sets the data directory for the config built next
    cfg = email_config()
    cfg.dashboard = DashboardConfig(listen="127.0.0.1:0")  # a port picked beforehand could be taken meanwhile
    harness = await start_console(cfg)
    port = (await start_dashboard(harness)).dashboard.port

    # The login link, from the real command reading the same config and data directory.
    config_file = write_config(tmp_path, f'[dashboard]\nlisten = "127.0.0.1:{port}"\n')
    env = {"HOME": str(tmp_path), "ANYY_HOME": str(cfg.data_dir), "PATH": "/usr/bin:/bin"}
    code, out, err = await anyy("dashboard", "url", "--config", config_file, env=env)
    assert code == 0, err
    url = out.strip()
    assert url.startswith(f"http://127.0.0.1:{port}/dashboard/login?token=")

    await asyncio.to_thread(browser.get, url)
    await until(browser, expected_conditions.presence_of_element_located((By.ID, "needs-approvals")))
    assert browser.current_url == f"http://127.0.0.1:{port}/dashboard/"  # home; the token left the address bar
    await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/dashboard/tools")
    row = await until(browser, expected_conditions.presence_of_element_located((By.ID, "tool-email_send")))
    assert "email_send" in row.text and "confirm" in row.text.split()
    await shot(browser, shots, "tools")

    _, approval_id, _ = await held(harness, model)
    await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/dashboard/approvals")
    card = await asyncio.to_thread(browser.find_element, By.ID, f"approval-{approval_id}")
    assert "Subject: Q1 numbers" in card.text and "To: Anna Berg <anna@example.net>" in card.text
    await shot(browser, shots, "approvals")
    await shot(browser, shots, "approvals-phone", PHONE)
    button = await asyncio.to_thread(card.find_element, By.CSS_SELECTOR, "button.approve")
    assert button.is_displayed() and button.location["x"] + button.size["width"] <= PHONE[0]
    await asyncio.to_thread(browser.set_window_size, *DESKTOP)
    assert smtp_recorder.received == []

    button = await asyncio.to_thread(card.find_element, By.CSS_SELECTOR, "button.approve")
    await asyncio.to_thread(button.click)  # returns before the next page has loaded
    flash = await until(browser, expected_conditions.presence_of_element_located((By.CLASS_NAME, "flash")))
    assert flash.text == f"email_send ({approval_id}): Approved; running it now."
    await harness.gw.idle()
    assert len(smtp_recorder.received) == 1 and smtp_recorder.received[0].message["Subject"] == "Q1 numbers"
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and rec.state == "succeeded" and rec.decided_by == "dashboard:owner"
    console = harness.new_output()
    assert "(update to message" in console and "✅ Approved — done by dashboard:owner: email_send" in console

    await asyncio.to_thread(browser.refresh)
    decided = await asyncio.to_thread(browser.find_element, By.ID, f"decided-{approval_id}")
    assert "succeeded" in decided.text and "dashboard:owner" in decided.text
    await shot(browser, shots, "approvals-decided")
    assert "Nothing is waiting for approval." in browser.page_source

    for name in OTHER_PAGES:
        await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/dashboard/{name}")
        heading = await asyncio.to_thread(browser.find_element, By.TAG_NAME, "h1")
        assert heading.text.lower() == name
        await shot(browser, shots, name)
    assert sorted(p.stem for p in shots.glob("*.png")) == sorted(
        ["tools", "approvals", "approvals-phone", "approvals-decided", *OTHER_PAGES])


async def test_a_login_link_clicked_in_another_sites_page_still_logs_in(
        browser, dashboard_config, start_console, start_dashboard):
    """The owner clicks the link in a web chat: the login request is cross-site, so a SameSite=Strict
    cookie would be withheld along a redirect; the self-refreshing login page keeps it."""
    harness = await start_console(dashboard_config())
    d = await start_dashboard(harness)
    login = f"{d.base}/dashboard/login?token={d.token}"

    async def elsewhere(request: web.Request) -> web.Response:
        return web.Response(text=f'<a id="go" href="{login}">dashboard</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", elsewhere)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        # "localhost" and "127.0.0.1" are different sites to the browser.
        await asyncio.to_thread(browser.get, f"http://localhost:{port}/")
        link = await asyncio.to_thread(browser.find_element, By.ID, "go")
        await asyncio.to_thread(link.click)
        heading = await until(browser, expected_conditions.presence_of_element_located((By.TAG_NAME, "h1")))
        assert heading.text == "What needs you" and browser.current_url == f"{d.base}/dashboard/"
    finally:
        await runner.cleanup()
