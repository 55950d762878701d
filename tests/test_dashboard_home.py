"""The dashboard's home in a real browser: what needs the owner (an approval named by its tool, a
stranger asking to pair, failing health), what is coming (a reminder, "in 2 h"), what it cost (a
server-rendered SVG chart of 30 days); Admit from the home page pairs the stranger; logout ends the
session. Screenshots go to the test's folder (docs/img/dashboard-home*.png are copies)."""

from __future__ import annotations

import asyncio

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from gateway.dashboard.context import relative
from store.records import Inbound, parse_iso
from tests.fixtures.model import reply, tool_call
from tests.test_dashboard_browser import DESKTOP, PHONE, shot, until

GOVERNED = {"overrides": {"task_create": {"execution": "confirm"}}}


async def test_home_shows_what_needs_the_owner_and_admits_a_stranger(
        browser, dashboard_config, start_console, start_dashboard, model, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    harness = await start_console(dashboard_config(telegram={"allowed_users": [1]}, tool_governance=GOVERNED,
                                                   model={"price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0}))
    d = await start_dashboard(harness)
    model.script(tool_call("task_create", {"title": "file taxes"}, usage=(1200, 80)),
                 reply("Waiting for your approval.", usage=(1300, 20)))
    await harness.say("add task file taxes")
    await harness.say("/remind 2h call the bank")
    await harness.gw.receive(Inbound(surface="telegram", chat_id="99", user_id="99", user_name="eve", text="hi"))
    await harness.gw.idle()

    await asyncio.to_thread(browser.get, f"{d.base}/dashboard/login?token={d.token}")
    needs = await until(browser, expected_conditions.presence_of_element_located((By.ID, "needs-approvals")))
    assert "Approvals waiting (1)" in needs.text and "task_create" in needs.text
    coming = browser.find_element(By.ID, "coming").text
    assert "in 2 h" in coming and "call the bank" in coming
    cost = browser.find_element(By.ID, "cost")
    assert "2,600 tokens" in cost.text and "0.01" in cost.text  # 2500 in at 2.00 + 100 out at 8.00 per Mtok
    bars = cost.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar")
    assert len(bars) == 30 and float(bars[-1].get_attribute("height")) > 0
    assert "<script" not in browser.page_source  # server-rendered: nothing to load
    await shot(browser, shots, "dashboard-home")
    await shot(browser, shots, "dashboard-home-phone", PHONE)
    await asyncio.to_thread(browser.set_window_size, *DESKTOP)

    pairing = browser.find_element(By.ID, "needs-pairing")
    assert "eve" in pairing.text and "telegram user 99" in pairing.text
    await asyncio.to_thread(pairing.find_element(By.CSS_SELECTOR, "button.approve").click)
    flash = await until(browser, expected_conditions.presence_of_element_located((By.CLASS_NAME, "flash")))
    assert flash.text == "Admitted eve (user 99)." and browser.current_url == f"{d.base}/dashboard/"
    assert await harness.gw.access.role("telegram", "99") == "guest"
    await asyncio.to_thread(browser.get, f"{d.base}/dashboard/pairing")
    assert "Nobody is asking." in browser.page_source and "99" in browser.find_element(By.TAG_NAME, "main").text

    await asyncio.to_thread(browser.find_element(By.CSS_SELECTOR, "form.logout button").click)
    await until(browser, lambda b: "Logged out" in b.page_source)
    await asyncio.to_thread(browser.get, f"{d.base}/dashboard/")
    assert "Not logged in" in browser.page_source


def test_relative_times_read_like_a_person_says_them():
    now = parse_iso("2026-12-01T10:00:00Z")
    assert relative(parse_iso("2026-12-01T12:00:00Z"), now) == "in 2 h"
    assert relative(parse_iso("2026-12-01T09:55:00Z"), now) == "5 min ago"
    assert relative(parse_iso("2026-12-04T10:00:00Z"), now) == "in 3 days"
    assert relative(parse_iso("2026-11-30T10:00:00Z"), now) == "1 day ago"
    assert relative(parse_iso("2026-12-01T10:00:10Z"), now) == "just now"
