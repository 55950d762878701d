"""The sign-in flows (gateway/accounts/google.py, microsoft.py, loopback.py) with the real libraries
(httpx, msal, google-auth) against the fake Google and Microsoft authorization servers over TLS.

The CLI around them (`anyy accounts add` as a subprocess, saving, Ctrl-C) is tests/test_accounts_cli.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.accounts.grant import GrantRefused, OAuthError, SignedIn
from gateway.accounts.loopback import RedirectRefused
from gateway.accounts.providers import oauth_provider, sign_in
from gateway.config.accounts import AccountConfig
from tests.support.account_signin import account_fields, consent, forget_devices, land, link_in, secret_env
from tests.support.graph_fake import GraphFake
from tests.support.oauth_provider import GOOGLE_USER, MS_USER, OAuthFake


@pytest.fixture
def google_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in secret_env().items():
        monkeypatch.setenv(key, value)


def account(oauth: OAuthFake, provider: str, services: list[str] | None = None) -> AccountConfig:
    return AccountConfig.model_validate(account_fields(provider, oauth.base_url, services))  # type: ignore[arg-type]


class Owner:
    """What the sign-in prints, and the owner's paste (a future the test settles, or never)."""

    def __init__(self) -> None:
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self.paste: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def say(self, text: str) -> None:
        self.lines.put_nowait(text)

    def pasted(self) -> asyncio.Future[str]:
        return self.paste

    async def link(self) -> str:
        while True:
            found = link_in(await asyncio.wait_for(self.lines.get(), 30))
            if found:
                return found


def start(cfg: AccountConfig, owner: Owner, paste: bool = False) -> asyncio.Task[SignedIn]:
    pasted: Callable[[], asyncio.Future[str]] = owner.pasted
    return asyncio.create_task(sign_in(cfg, owner.say, paste=paste, pasted=pasted))


async def test_google_loopback_sign_in_with_pkce_and_state(oauth: OAuthFake, google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    link = await owner.link()
    query = parse_qs(urlsplit(link).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["state"][0]) >= 32
    assert set(query["scope"][0].split()) == {"openid", "email", "https://mail.google.com/",
                                              "https://www.googleapis.com/auth/calendar"}
    redirect = await consent(link)
    assert redirect.startswith(query["redirect_uri"][0])
    page = await land(redirect)
    assert page.status_code == 200 and "close this tab" in page.text
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == GOOGLE_USER
    assert set(signed.grants) == {"mail", "calendar"}
    assert oauth.bearer(signed.grants["mail"].access_token.get_secret_value()) is not None
    assert signed.refresh_token.get_secret_value() in oauth.refresh_tokens
    assert oauth.calls["google.token.authorization_code"] == 1


async def test_google_asks_only_the_services_configured(oauth: OAuthFake, google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google", ["calendar"]), owner)
    link = await owner.link()
    assert "mail.google.com" not in parse_qs(urlsplit(link).query)["scope"][0]
    await land(await consent(link))
    signed = await asyncio.wait_for(task, 30)
    assert set(signed.grants) == {"calendar"}


async def test_google_paste_of_the_address_the_browser_ended_on(oauth: OAuthFake, google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    redirect = await consent(await owner.link())  # the browser is elsewhere: its "can't connect" page
    owner.paste.set_result(f"  {redirect}  ")
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == GOOGLE_USER and oauth.calls["google.token.authorization_code"] == 1


async def test_a_pasted_address_of_another_sign_in_is_refused(oauth: OAuthFake, google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    redirect = urlsplit(await consent(await owner.link()))
    query = parse_qs(redirect.query)
    forged = redirect._replace(query=f"code={query['code'][0]}&state=someone-elses-state").geturl()
    owner.paste.set_result(forged)
    with pytest.raises(RedirectRefused, match="state"):
        await asyncio.wait_for(task, 30)
    assert oauth.calls["google.token.authorization_code"] == 0  # the code was never used


async def test_a_forged_request_to_the_listener_is_ignored_and_the_real_redirect_still_signs_in(
        oauth: OAuthFake, google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    real = await consent(await owner.link())
    listener = urlsplit(real)
    # Any local process, or a page in the owner's browser (<img src="http://127.0.0.1:PORT/?...">), can
    # reach the port: a wrong state, no state, no code, no query at all.
    for query in ("code=x&state=forged", "code=x", "error=access_denied&state=forged", "state=y", ""):
        page = await land(listener._replace(query=query).geturl())
        assert page.status_code == 400 and "ignored" in page.text
    assert not task.done()
    assert oauth.calls["google.token.authorization_code"] == 0
    page = await land(real)
    assert page.status_code == 200 and "close this tab" in page.text
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == GOOGLE_USER and oauth.calls["google.token.authorization_code"] == 1


async def test_after_a_forged_request_the_paste_still_races_the_listener(oauth: OAuthFake,
                                                                         google_secret: None) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    real = await consent(await owner.link())
    await land(urlsplit(real)._replace(query="code=x&state=forged").geturl())
    owner.paste.set_result(real)
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == GOOGLE_USER and oauth.calls["google.token.authorization_code"] == 1


@pytest.mark.parametrize("text", ["https://evil.example/?code=a&state=b", "not an address at all",
                                  "http://127.0.0.1:1/?code=a&state=b"])
async def test_a_foreign_pasted_address_gets_a_clear_error(oauth: OAuthFake, google_secret: None, text: str) -> None:
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    await owner.link()
    owner.paste.set_result(text)
    with pytest.raises(RedirectRefused, match=r"not the address|another sign-in"):
        await asyncio.wait_for(task, 30)


async def test_google_consent_denied_says_so(oauth: OAuthFake, google_secret: None) -> None:
    oauth.deny = True
    owner = Owner()
    task = start(account(oauth, "google"), owner)
    await land(await consent(await owner.link()))
    with pytest.raises(RedirectRefused, match="access_denied"):
        await asyncio.wait_for(task, 30)


async def test_microsoft_device_code_pending_then_slow_down_then_approved(oauth: OAuthFake) -> None:
    forget_devices(oauth)
    owner = Owner()
    task = start(account(oauth, "microsoft"), owner)
    user_code = await asyncio.to_thread(oauth.wait_device)
    printed = await asyncio.wait_for(owner.lines.get(), 30)
    assert user_code in printed and "devicelogin" in printed
    await wait_for_calls(oauth, "microsoft.token.device_code", 1)  # authorization_pending
    oauth.fail_next("microsoft.token", 400, {"error": "slow_down", "error_description": "polling too fast"})
    await wait_for_calls(oauth, "microsoft.token.device_code", 2)  # slow_down: msal adds 5 s to the interval
    oauth.approve_device(user_code)
    signed = await asyncio.wait_for(task, 60)
    assert signed.address == MS_USER
    mail, calendar = signed.grants["mail"], signed.grants["calendar"]
    assert oauth.bearer(mail.access_token.get_secret_value()).resource == "outlook"  # type: ignore[union-attr]
    assert oauth.bearer(calendar.access_token.get_secret_value()).resource == "graph"  # type: ignore[union-attr]
    # the Graph token came from the device code's refresh token, which then rotated: the newest is kept
    assert oauth.calls["microsoft.token.refresh_token"] == 1
    assert signed.refresh_token.get_secret_value() in oauth.refresh_tokens
    assert oauth.calls["microsoft.token.device_code"] == 3


async def wait_for_calls(oauth: OAuthFake, key: str, count: int) -> None:
    async with asyncio.timeout(30):
        while oauth.calls[key] < count:
            await asyncio.sleep(0.05)


async def test_microsoft_device_code_expired_gives_a_clear_error(oauth: OAuthFake) -> None:
    oauth.device_lifetime = 1.5
    owner = Owner()
    task = start(account(oauth, "microsoft"), owner)
    with pytest.raises(OAuthError, match="expired"):
        await asyncio.wait_for(task, 60)


async def test_microsoft_paste_flow_uses_pkce_and_state(oauth: OAuthFake) -> None:
    owner = Owner()
    task = start(account(oauth, "microsoft"), owner, paste=True)
    link = await owner.link()
    query = parse_qs(urlsplit(link).query)
    assert query["code_challenge_method"] == ["S256"] and query["state"]
    assert query["redirect_uri"][0].startswith("http://localhost:")
    owner.paste.set_result(await consent(link))
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == MS_USER and set(signed.grants) == {"mail", "calendar"}
    assert oauth.calls["microsoft.token.device_code"] == 0


UPN = "j.doe@contoso.onmicrosoft.example"  # the sign-in name the id token names
MAILBOX = "jane.doe@contoso.example"  # the mailbox's primary SMTP address: what mail is sent from


@pytest.mark.parametrize(("services", "mail", "saved"), [
    (None, MAILBOX, MAILBOX),  # Graph's `mail`, not the id token's sign-in name
    (None, "", UPN),  # a user without a mailbox address: the id token's
    (["email"], MAILBOX, UPN),  # no Graph token to ask with: the id token's, and no Graph call
])
async def test_microsoft_saves_the_mailbox_address_graph_names(oauth: OAuthFake, graph: GraphFake,
                                                               services: list[str] | None, mail: str,
                                                               saved: str) -> None:
    oauth.users["microsoft"] = UPN
    graph.mailboxes[UPN] = mail
    owner = Owner()
    task = start(account(oauth, "microsoft", services), owner, paste=True)
    owner.paste.set_result(await consent(await owner.link()))
    signed = await asyncio.wait_for(task, 30)
    assert signed.address == saved
    asked = [r for r in graph.requests if r[:2] == ("GET", "/v1.0/me")]
    assert asked == ([] if services == ["email"] else [("GET", "/v1.0/me", 200)])


async def test_microsoft_falls_back_to_the_id_token_when_graph_fails(oauth: OAuthFake, graph: GraphFake) -> None:
    oauth.users["microsoft"] = UPN
    graph.mailboxes[UPN] = MAILBOX
    cfg = account(oauth, "microsoft")
    cfg.graph_url = f"{oauth.base_url}/nowhere"  # 404
    owner = Owner()
    task = start(cfg, owner, paste=True)
    owner.paste.set_result(await consent(await owner.link()))
    assert (await asyncio.wait_for(task, 30)).address == UPN


async def test_microsoft_refresh_rotates_and_a_revoked_grant_is_refused(oauth: OAuthFake) -> None:
    issued = oauth.issue("microsoft", ["Calendars.ReadWrite", "User.Read", "offline_access", "openid"])
    provider = oauth_provider(account(oauth, "microsoft"))
    assert issued.refresh_token is not None
    grant = await provider.refresh(issued.refresh_token, "calendar")
    assert grant.refresh_token is not None and grant.refresh_token.get_secret_value() != issued.refresh_token
    assert oauth.bearer(grant.access_token.get_secret_value()).resource == "graph"  # type: ignore[union-attr]
    with pytest.raises(GrantRefused):  # the rotated-away one is dead
        await provider.refresh(issued.refresh_token, "calendar")
    oauth.revoke(MS_USER)
    with pytest.raises(GrantRefused):
        await provider.refresh(grant.refresh_token.get_secret_value(), "calendar")
    assert await provider.revoke("anything") is False


async def test_google_refresh_keeps_the_token_and_an_outage_is_not_a_refusal(oauth: OAuthFake,
                                                                             google_secret: None) -> None:
    issued = oauth.issue("google", ["https://mail.google.com/", "openid", "email"])
    provider = oauth_provider(account(oauth, "google"))
    assert issued.refresh_token is not None
    grant = await provider.refresh(issued.refresh_token, "mail")
    assert grant.refresh_token is None and oauth.bearer(grant.access_token.get_secret_value()) is not None
    oauth.fail_next("google.token", 400, {"error": "invalid_request"})
    with pytest.raises(OAuthError) as raised:
        await provider.refresh(issued.refresh_token, "mail")
    assert not isinstance(raised.value, GrantRefused)
    assert await provider.revoke(issued.refresh_token) is True
    with pytest.raises(GrantRefused):
        await provider.refresh(issued.refresh_token, "mail")
