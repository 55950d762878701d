"""The browser connector against the real Debian Chromium and a local site: snapshots with refs,
acting only on the page state asked for, and the guard applied to every request the page makes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.browser import Browser, BrowserError, StaleTarget
from connectors.web import Guard
from tests.fixtures.browser_site import BrowserSite, public_127_0_0_2

OWNER = "console:owner"


async def test_a_snapshot_shows_the_heading_and_the_form_fields_with_refs(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    state = await browser.navigate(OWNER, browser_site.url("/form"))
    assert (state.title, state.status) == ("Sign the guest book", 200)
    _, snap = await browser.snapshot(OWNER)
    assert 'heading "Guest book"' in snap.text and "Leave your name below." in snap.text
    roles = {(e.role, e.name) for e in snap.elements.values()}
    assert {("textbox", "Your name"), ("button", "Sign"), ("link", "Skip")} <= roles
    for ref, element in snap.elements.items():
        assert f'{element.role} "{element.name}" [ref={ref}]' in snap.text


async def test_fill_then_click_posts_the_typed_value_once(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    url = browser_site.url("/form")
    await browser.navigate(OWNER, url)
    _, snap = await browser.snapshot(OWNER)
    by_role = {e.role: e for e in snap.elements.values()}
    await browser.act(OWNER, url, "type", by_role["textbox"], text="Ada Lovelace")
    assert browser_site.posts == []  # typing alone submits nothing
    state = await browser.act(OWNER, url, "click", by_role["button"])
    assert browser_site.posts == [{"name": "Ada Lovelace"}]
    assert state.title == "Signed" and state.url == browser_site.url("/submit")


async def test_an_action_for_another_page_or_a_changed_element_does_nothing(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    url = browser_site.url("/form")
    with pytest.raises(StaleTarget, match="no page is open"):
        await browser.act(OWNER, url, "click", None, text="Enter")
    await browser.navigate(OWNER, url)
    _, snap = await browser.snapshot(OWNER)
    button = next(e for e in snap.elements.values() if e.role == "button")
    await browser.navigate(OWNER, browser_site.url("/thanks"))
    with pytest.raises(StaleTarget, match=r"the page is now .*/thanks, not .*/form"):
        await browser.act(OWNER, url, "click", button)
    await browser.navigate(OWNER, url)
    renamed = type(button)(button.ref, "button", "Delete everything")
    with pytest.raises(StaleTarget):
        await browser.act(OWNER, url, "click", renamed)
    assert browser_site.posts == []


async def test_a_private_address_is_refused_with_the_reason(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser(Guard())
    with pytest.raises(BrowserError, match=re.escape("refused: 127.0.0.1 is a loopback address")):
        await browser.navigate(OWNER, browser_site.url("/form"))
    assert browser_site.hits["/form"] == 0


async def test_subrequests_and_redirects_to_private_addresses_are_never_sent(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser(Guard(address_policy=public_127_0_0_2))
    state = await browser.navigate(OWNER, browser_site.url("/leaky", host="127.0.0.2"))
    assert state.title == "Leaky"
    assert browser_site.hits["/secret"] == 0
    # the image over http (a proxied request) and over https (a CONNECT tunnel) hold up the load event
    assert {r.url for r in state.refused} >= {browser_site.url("/secret?via=img"), f"127.0.0.1:{browser_site.port}"}
    assert all("loopback" in r.reason for r in state.refused if not r.sent)  # a read opens no WebSocket at all
    with pytest.raises(BrowserError, match=r"refused.*loopback"):
        await browser.navigate(OWNER, browser_site.url("/to-private", host="127.0.0.2"))
    assert browser_site.hits["/secret"] == 0 and browser_site.hits["/to-private"] == 1


async def test_cookies_persist_per_owner_across_a_restart(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    await browser.navigate(OWNER, browser_site.url("/cookie"))
    await browser.aclose()
    assert (await browser.navigate(OWNER, browser_site.url("/cookie"))).title == "Cookie"
    _, snap = await browser.snapshot(OWNER)
    assert "Last visit: seen" in snap.text
    await browser.navigate("telegram:42", browser_site.url("/cookie"))
    _, other = await browser.snapshot("telegram:42")
    assert "Last visit: none" in other.text


async def test_the_browser_starts_on_first_use_and_closes_when_idle(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser(idle_s=0.5)
    assert not browser.running
    await browser.navigate(OWNER, browser_site.url("/form"))
    assert browser.running
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while browser.running:  # the idle timer fires on the loop; nothing else wakes this test
        assert loop.time() < deadline, "the browser did not close after being idle"
        await asyncio.sleep(0.1)
    with pytest.raises(StaleTarget, match="no page is open"):
        await browser.snapshot(OWNER)


async def test_a_page_that_closed_itself_counts_as_no_page_and_navigating_opens_a_new_one(
        make_browser: Callable[..., Browser], browser_site: BrowserSite) -> None:
    browser = make_browser()
    url = browser_site.url("/form")
    await browser.navigate(OWNER, url)
    await browser._owners[OWNER].page.close()  # as a page's own window.close() would
    with pytest.raises(StaleTarget, match="no page is open"):
        await browser.act(OWNER, url, "press", None, text="Enter")
    assert (await browser.navigate(OWNER, url)).title == "Sign the guest book"


async def test_a_download_is_refused_and_reported(make_browser: Callable[..., Browser], tmp_path: Path,
                                                  browser_site: BrowserSite) -> None:
    browser = make_browser()
    url = browser_site.url("/form")
    await browser.navigate(OWNER, url)
    _, snap = await browser.snapshot(OWNER)
    link = next(e for e in snap.elements.values() if e.name == "Get the list")
    state = await browser.act(OWNER, url, "click", link)
    assert state.downloads_refused == 1 and state.url == url
    assert browser_site.hits["/file"] == 1 and not list(tmp_path.rglob("list.csv"))
