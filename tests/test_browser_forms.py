"""An approved click sends the form the owner saw: the approval prompt shows where the form goes and its
hidden fields, and a page that changed them (or the form's target) after the owner was asked sends
nothing; and what a page tried to send while only read reaches the model as the page's snapshot says
it. Through the real gateway (console surface, fake model) and the real Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from store.approvals import Approvals
from tests.fixtures.browser_site import BrowserSite
from tests.test_browser_tools import call, only_pending, ref_of


@pytest.fixture
async def owner(start_console: Any, make_config: Any) -> Any:
    return await start_console(make_config(browser={"enabled": True, "allow_private_urls": True, "timeout_s": 10}))


async def held_pay_click(owner: Any, model: Any, browser_site: BrowserSite) -> Any:
    page = await call(owner, model, "browser_navigate", {"url": browser_site.url("/pay")})
    await call(owner, model, "browser_click", {"ref": ref_of(page, "button", "Pay")})
    return await only_pending(owner)


async def test_the_prompt_shows_the_forms_target_and_hidden_fields_and_approve_sends_them(
        owner: Any, model: Any, browser_site: BrowserSite) -> None:
    click = await held_pay_click(owner, model, browser_site)
    assert f"sends a form (POST) to {browser_site.url('/submit')}" in click.preview, click.preview
    assert "hidden fields: to=plumber" in click.preview, click.preview
    await owner.say(f"/approve {click.id}")
    assert browser_site.posts == [{"to": "plumber", "amount": "80"}]


@pytest.mark.parametrize("change", [
    "document.querySelector('input[name=to]').value = 'attacker'",
    "document.querySelector('form').action = '/submit?to=attacker'",
    "document.querySelector('form').insertAdjacentHTML('beforeend', '<input type=hidden name=cc value=x>')",
])
async def test_a_form_changed_behind_the_same_button_after_the_owner_was_asked_sends_nothing(
        owner: Any, model: Any, browser_site: BrowserSite, change: str) -> None:
    click = await held_pay_click(owner, model, browser_site)
    browser = owner.gw.services["browser"]
    await browser._owners["console:owner"].page.evaluate(change)  # the page's own script, later
    out = await owner.say(f"/approve {click.id}")
    assert "changed since" in out and "nothing was done" in out, out
    assert browser_site.posts == [] and browser_site.hits["/submit"] == 0
    assert (await Approvals(owner.gw.store).get(click.id)).state == "failed"


async def test_a_hidden_field_changed_by_the_buttons_own_click_handler_is_not_sent(
        owner: Any, model: Any, browser_site: BrowserSite) -> None:
    click = await held_pay_click(owner, model, browser_site)
    browser = owner.gw.services["browser"]
    await browser._owners["console:owner"].page.evaluate(
        "document.querySelector('button').addEventListener('click', "
        "() => { document.querySelector('input[name=to]').value = 'attacker'; })")
    out = await owner.say(f"/approve {click.id}")
    assert browser_site.posts == [] and browser_site.hits["/submit"] == 0, out
    assert "Blocked: this page tried to send a form to" in out and "not the one the owner approved" in out, out


async def test_the_model_reads_what_a_page_tried_to_send_outside_nothing_was_sent(
        owner: Any, model: Any, browser_site: BrowserSite) -> None:
    await call(owner, model, "browser_navigate", {"url": browser_site.url("/acts")})
    sink = browser_site.url("/sink", host="127.0.0.2")
    for _ in range(50):  # the page acts on its own time: read it again until its form was refused
        page = await call(owner, model, "browser_snapshot", {})
        if f"this page tried to send a form to {sink}?via=form: blocked" in page:
            break
    else:
        raise AssertionError(page)
    assert "a read sends nothing, only an approved click, type or press may" in page
    assert browser_site.sunk == []


async def test_an_approved_enter_in_a_field_of_a_changed_form_sends_nothing(
        owner: Any, model: Any, browser_site: BrowserSite) -> None:
    await call(owner, model, "browser_navigate", {"url": browser_site.url("/pay")})
    browser = owner.gw.services["browser"]
    page = browser._owners["console:owner"].page
    await page.focus("input[name=amount]")
    await call(owner, model, "browser_press", {"key": "Enter"})
    press = await only_pending(owner)
    assert "hidden fields: to=plumber" in press.preview, press.preview
    await page.evaluate("document.querySelector('input[name=to]').value = 'attacker'")
    out = await owner.say(f"/approve {press.id}")
    assert "the focused field changed since" in out and "nothing was done" in out, out
    assert browser_site.posts == []
