"""Tokens that look after themselves, against the fake Google and Microsoft authorization servers
(tests/support/oauth_provider.py) over TLS, through the real clients (google-auth, msal), on a real store:
served from the store while valid, refreshed before expiry (also after a restart), refreshed once when two
residents need a token at the same moment, expired with one notice per owner when the provider refuses."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from connectors.oauth_token import SignInNeeded, TokenUnavailable
from gateway.accounts import AccountTokens, account_tokens
from gateway.accounts.grant import SignedIn, TokenGrant
from gateway.accounts.vault import KEY_ENV
from gateway.checkpoints import intercept
from gateway.config import Config, load_config, parse_config
from gateway.config.accounts import Resource
from store.db import Store
from store.leases import LEASE_S
from tests.support.account_signin import account_fields, account_toml, secret_env
from tests.support.cli import ANYY, anyy, model_config, write_config
from tests.support.crash import Child
from tests.support.model_wire import reply, tool_call
from tests.support.oauth_provider import (
    GOOGLE_CALENDAR,
    GOOGLE_MAIL,
    GOOGLE_USER,
    GRAPH_CALENDARS,
    GRAPH_USER,
    MS_USER,
    OUTLOOK_IMAP,
    OUTLOOK_SMTP,
    OAuthFake,
    Provider,
)
from tests.support.ports import port_of, refusing_socket
from tests.support.postgres import Backend

SCOPES = {"google": [GOOGLE_MAIL, GOOGLE_CALENDAR, "openid", "email"],
          "microsoft": [OUTLOOK_IMAP, OUTLOOK_SMTP, GRAPH_CALENDARS, GRAPH_USER, "offline_access", "openid", "email"]}
REFRESHES = {"google": "google.token.refresh_token", "microsoft": "microsoft.token.refresh_token"}
NAME = {"google": "personal", "microsoft": "work"}
PROVIDERS: tuple[Provider, ...] = ("google", "microsoft")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in secret_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())  # as residents on several machines share it


def make_config(tmp_path: Path, backend: Backend, oauth: OAuthFake, **more: Any) -> Config:
    cfg = parse_config({"store": backend.store_section(str(tmp_path / "anyy.db")),
                        "accounts": {NAME[p]: account_fields(p, oauth.base_url) for p in ("google", "microsoft")},
                        **more})
    cfg.data_dir = tmp_path / "data"
    return cfg


def sign_in(oauth: OAuthFake, provider: Provider, left: timedelta = timedelta(hours=1)) -> SignedIn:
    """What `anyy accounts add` stores, minted at the fake: Google's one token serves both resources,
    Microsoft's first token is Outlook's (mail); its access token expires `left` from now by our books."""
    issued = oauth.issue(provider, SCOPES[provider])
    grant = TokenGrant(access_token=SecretStr(issued.access_token), expires_at=datetime.now(UTC) + left)
    grants: dict[Resource, TokenGrant] = {"mail": grant, "calendar": grant} if provider == "google" else {"mail": grant}
    assert issued.refresh_token is not None
    return SignedIn(address=issued.user, refresh_token=SecretStr(issued.refresh_token), grants=grants,
                    scopes=SCOPES[provider])


@pytest.fixture
async def stores(tmp_path: Path, backend: Backend) -> Any:
    """Open stores on the test's database, each a resident of its own (owner), closed after the test."""
    opened: list[Store] = []

    async def open_store(owner: str) -> Store:
        store = await Store(tmp_path / "anyy.db", url=backend.url, owner=owner).open()
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()


def live(oauth: OAuthFake, token: str) -> bool:
    return oauth.bearer(token) is not None


@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_a_valid_token_is_served_from_the_store_without_a_token_call(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any, provider: Provider) -> None:
    cfg = make_config(tmp_path, backend, oauth)
    accounts = account_tokens(cfg, await stores("a"))
    signed = sign_in(oauth, provider)
    await accounts.save_sign_in(NAME[provider], signed)
    for _ in range(5):
        assert await accounts.token(NAME[provider], "mail") == signed.grants["mail"].access_token.get_secret_value()
    assert oauth.calls[REFRESHES[provider]] == 0
    assert await accounts.address(NAME[provider]) == (GOOGLE_USER if provider == "google" else MS_USER)


@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_refreshed_five_minutes_before_expiry_and_kept_across_a_restart(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any, provider: Provider) -> None:
    cfg = make_config(tmp_path, backend, oauth)
    accounts = account_tokens(cfg, await stores("a"))
    signed = sign_in(oauth, provider, left=timedelta(minutes=4))  # still live, but inside the margin
    await accounts.save_sign_in(NAME[provider], signed)
    fresh = await accounts.token(NAME[provider], "mail")
    assert fresh != signed.grants["mail"].access_token.get_secret_value() and live(oauth, fresh)
    assert oauth.calls[REFRESHES[provider]] == 1
    restarted = account_tokens(cfg, await stores("a-restarted"))  # a new process on the same store
    assert await restarted.token(NAME[provider], "mail") == fresh
    assert oauth.calls[REFRESHES[provider]] == 1
    assert [s.state for s in await restarted.states()][0 if provider == "google" else 1] == "connected"


async def test_microsoft_rotation_is_kept_so_every_resource_refreshes_with_the_newest_token(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any) -> None:
    cfg = make_config(tmp_path, backend, oauth)
    accounts = account_tokens(cfg, await stores("a"))
    await accounts.save_sign_in("work", sign_in(oauth, "microsoft", left=timedelta(seconds=-1)))
    calendar = await accounts.token("work", "calendar")  # Graph: no token yet, one refresh (rotates)
    mail = await accounts.token("work", "mail")  # Outlook: expired, a refresh with the rotated token
    assert live(oauth, calendar) and live(oauth, mail) and calendar != mail
    resources = {token.resource for token in (oauth.bearer(calendar), oauth.bearer(mail)) if token}
    assert len(resources) == 2  # one token per resource (Outlook, Graph)
    assert oauth.calls["microsoft.token.refresh_token"] == 2
    assert [s.state for s in await accounts.states()] == ["sign-in needed", "connected"]


@pytest.mark.both_backends
@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_residents_needing_a_fresh_token_at_once_refresh_once(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any, provider: Provider) -> None:
    """Residents on one database (each its own connection and owner) ask at the same moment: one
    refresh, and everyone gets the token it stored; Microsoft's rotation is not lost (a later refresh
    with the stored refresh token works)."""
    cfg = make_config(tmp_path, backend, oauth)
    residents = [account_tokens(cfg, await stores(f"resident-{i}")) for i in range(4)]
    await residents[0].save_sign_in(NAME[provider], sign_in(oauth, provider, left=timedelta(minutes=1)))
    got = await asyncio.gather(*(r.token(NAME[provider], "mail") for r in residents))
    assert len(set(got)) == 1 and live(oauth, got[0])
    assert oauth.calls[REFRESHES[provider]] == 1
    await residents[0].store.run(lambda db: db.execute(  # the next refresh is due
        "UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00.000000+00:00'"))
    again = await asyncio.gather(*(r.token(NAME[provider], "mail") for r in reversed(residents)))
    assert len(set(again)) == 1 and live(oauth, again[0]) and again[0] != got[0]
    assert oauth.calls[REFRESHES[provider]] == 2
    assert await residents[0].store.run(lambda db: db.execute("SELECT count(*) FROM leases").fetchone()[0]) == 0


@pytest.mark.both_backends
@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_residents_told_at_once_that_a_token_was_refused_refresh_once(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any, provider: Provider) -> None:
    """The provider cut the token off long before the expiry the store keeps; every resident's server
    refuses it at the same moment: one refresh, everyone gets its token, and the refused one is never
    served again."""
    cfg = make_config(tmp_path, backend, oauth)
    residents = [account_tokens(cfg, await stores(f"resident-{i}")) for i in range(4)]
    await residents[0].save_sign_in(NAME[provider], sign_in(oauth, provider))  # an hour left by our books
    refused = await residents[0].token(NAME[provider], "mail")
    oauth.expire_access_tokens()
    got = await asyncio.gather(*(r.token(NAME[provider], "mail", refused=refused) for r in residents))
    assert len(set(got)) == 1 and got[0] != refused and live(oauth, got[0])
    assert oauth.calls[REFRESHES[provider]] == 1
    assert await residents[3].token(NAME[provider], "mail") == got[0]  # served from the store
    assert oauth.calls[REFRESHES[provider]] == 1


@pytest.mark.parametrize("provider", ["google", "microsoft"])
async def test_a_refused_refresh_expires_the_account_and_every_call_names_the_command(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any, provider: Provider) -> None:
    cfg = make_config(tmp_path, backend, oauth)
    accounts = account_tokens(cfg, await stores("a"))
    name = NAME[provider]
    await accounts.save_sign_in(name, sign_in(oauth, provider, left=timedelta(seconds=10)))
    oauth.revoke(GOOGLE_USER if provider == "google" else MS_USER)
    told: list[int] = []

    async def notify() -> None:
        told.append(1)

    accounts.on_expired = notify
    for _ in range(3):
        with pytest.raises(SignInNeeded) as caught:
            await accounts.token(name, "mail")
        text = str(caught.value)
        assert f"`anyy accounts add {name}`" in text and "refused" in text and "\n" not in text
    assert oauth.calls[REFRESHES[provider]] == 1  # the later calls never ask the provider again
    assert told == [1]
    state = next(s for s in await accounts.states() if s.name == name)
    assert (state.state, state.reconnect) == ("expired", f"anyy accounts add {name}")
    assert await accounts.unnotified() == [(name, GOOGLE_USER if provider == "google" else MS_USER, 1)]
    restarted = account_tokens(cfg, await stores("b"))
    with pytest.raises(SignInNeeded):
        await restarted.token(name, "calendar")
    await accounts.save_sign_in(name, sign_in(oauth, provider))  # `anyy accounts add` again
    assert live(oauth, await restarted.token(name, "mail"))
    assert await accounts.unnotified() == []


async def test_an_outage_keeps_the_account_and_serves_a_token_that_still_works(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any) -> None:
    store = await stores("a")
    down = make_config(tmp_path, backend, oauth)
    closed = refusing_socket()
    down.accounts["personal"].token_url = f"https://127.0.0.1:{port_of(closed)}/token"  # refused
    accounts = account_tokens(down, store)
    signed = sign_in(oauth, "google", left=timedelta(minutes=3))
    await accounts.save_sign_in("personal", signed)
    assert await accounts.token("personal", "mail") == signed.grants["mail"].access_token.get_secret_value()
    await store.run(lambda db: db.execute("UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))
    with pytest.raises(TokenUnavailable, match=r"cannot reach Google's token endpoint.*try again later"):
        await accounts.token("personal", "mail")
    assert next(s.state for s in await accounts.states()) == "connected"
    closed.close()
    back = account_tokens(make_config(tmp_path, backend, oauth), store)
    assert live(oauth, await back.token("personal", "mail"))  # the provider is back: nothing was lost


async def test_the_owners_are_told_once_through_the_outbox(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, start_console: Any) -> None:
    cfg = make_config(tmp_path, backend, oauth, telegram={"allowed_users": [1001, 1002]},
                      slack={"allowed_users": ["U0OWNER"]})
    harness = await start_console(cfg)
    accounts: AccountTokens = harness.gw.services["accounts"]
    await accounts.save_sign_in("work", sign_in(oauth, "microsoft", left=timedelta(seconds=0)))
    await accounts.save_sign_in("personal", sign_in(oauth, "google", left=timedelta(seconds=0)))
    oauth.revoke(MS_USER)
    for _ in range(2):
        with pytest.raises(SignInNeeded):
            await accounts.token("work", "calendar")

    async def notices(store: Store) -> list[tuple[str, str, str]]:
        return await store.run(lambda db: db.execute(
            "SELECT dedupe_key, chat_id, payload FROM outbox WHERE dedupe_key LIKE 'account-expired:%'"
            " ORDER BY dedupe_key").fetchall())

    found = await notices(harness.gw.store)
    assert [(key.split(":")[1], chat) for key, chat, _ in found] == [
        ("work", "U0OWNER"), ("work", "1001"), ("work", "1002")]
    assert all("`anyy accounts add work`" in text and MS_USER in text for _, _, text in found)
    assert await accounts.unnotified() == []
    await harness.gw.stop()
    # Found out by a process that tells nobody (an admin command), while no resident runs ...
    async with Store(tmp_path / "anyy.db", url=backend.url, owner="admin") as store:
        oauth.revoke(GOOGLE_USER)
        with pytest.raises(SignInNeeded):
            await account_tokens(cfg, store).token("personal", "mail")
    # ... the next resident tells the owners; nobody hears of `work` twice.
    harness = await start_console(cfg)
    found = await notices(harness.gw.store)
    assert sorted(key.split(":")[1] for key, _, _ in found) == ["personal"] * 3 + ["work"] * 3
    assert all("`anyy accounts add personal`" in text for key, _, text in found if ":personal:" in key)
    await harness.gw.stop()
    third = await start_console(cfg)
    assert len(await notices(third.gw.store)) == 6


async def test_no_token_reaches_a_log_line_an_error_or_the_store_in_clear(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the libraries' (msal, google-auth, urllib3) too
    cfg = make_config(tmp_path, backend, oauth)
    store = await stores("a")
    accounts = account_tokens(cfg, store)
    seen: set[str] = set()
    errors: list[str] = []
    for provider in PROVIDERS:
        signed = sign_in(oauth, provider, left=timedelta(0))
        seen |= {signed.refresh_token.get_secret_value(), signed.grants["mail"].access_token.get_secret_value()}
        await accounts.save_sign_in(NAME[provider], signed)
        seen.add(await accounts.token(NAME[provider], "mail"))
        seen.add(await accounts.token(NAME[provider], "calendar"))
        oauth.revoke(GOOGLE_USER if provider == "google" else MS_USER)
        await store.run(lambda db: db.execute("UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))
        with pytest.raises(SignInNeeded) as caught:
            await accounts.token(NAME[provider], "mail")
        errors += [str(caught.value), repr(caught.value)]
    with oauth.lock:
        seen |= set(oauth.refresh_tokens) | set(oauth.access_tokens)  # every token the fake ever issued
    dump = await store.run(lambda db: repr([db.execute(f"SELECT * FROM {t}").fetchall() for t in (
        "accounts", "account_tokens", "audit", "messages", "outbox", "leases")]))
    text = "\n".join([caplog.text, *errors, dump, repr(await accounts.states())])
    assert "account_token_refreshed" in caplog.text  # the log was captured
    leaked = [t[:12] for t in seen if t in text]
    assert leaked == []


async def test_doctor_shows_each_accounts_state_and_a_wrong_key(
        oauth: OAuthFake, model: Any, home: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)  # the key file in the data directory
    monkeypatch.setenv("ANYY_HOME", home["ANYY_HOME"])
    path = model_config(tmp_path, model, "".join(account_toml(NAME[p], p, oauth.base_url) for p in PROVIDERS))
    cfg = load_config(path)
    async with cfg.new_store() as store:
        accounts = account_tokens(cfg, store)
        await accounts.save_sign_in("personal", sign_in(oauth, "google"))
        await accounts.save_sign_in("work", sign_in(oauth, "microsoft", left=timedelta(0)))
        oauth.revoke(MS_USER)
        with pytest.raises(SignInNeeded):
            await accounts.token("work", "mail")
    env = home | secret_env()
    _, out, _ = await anyy("doctor", "--config", path, env=env)
    assert f"✓ account: personal (google, {GOOGLE_USER}; email, calendar): connected\n" in out, out
    assert (f"✗ account: work (microsoft, {MS_USER}; email, calendar): expired — run `anyy accounts add work`"
            in out), out
    assert "✗ accounts:" not in out
    _, out, _ = await anyy("doctor", "--config", path, env=env | {KEY_ENV: Fernet.generate_key().decode()})
    assert "✗ accounts: the account tokens in the store were encrypted with another key than $ANYY_SECRET_KEY" \
        in out, out


async def test_a_tool_on_an_expired_account_says_the_command_and_the_model_never_sees_a_token(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, start_console: Any, model: Any) -> None:
    cfg = make_config(tmp_path, backend, oauth, model={"base_url": model.url_openai, "model": "fake-1"})
    harness = await start_console(cfg)
    accounts: AccountTokens = harness.gw.services["accounts"]
    signed = sign_in(oauth, "microsoft", left=timedelta(0))
    await accounts.save_sign_in("work", signed)
    oauth.revoke(MS_USER)
    model.script(tool_call("calendar_list", {"start": "2026-12-07T00:00", "end": "2026-12-14T00:00",
                                             "account": "work"}), reply("Done."))
    await harness.say("What is on my work calendar this week?")
    result = next(m["content"] for m in model.requests[1].messages if m["role"] == "tool")
    assert "`anyy accounts add work`" in result, result
    sent = json.dumps([r.body for r in model.requests])
    with oauth.lock:
        issued = set(oauth.refresh_tokens) | set(oauth.access_tokens)
    assert issued and not [t[:12] for t in issued if t in sent]
    audit = await harness.gw.store.run(lambda db: repr(db.execute("SELECT * FROM audit").fetchall()))
    assert not [t[:12] for t in issued if t in audit]


async def test_a_refresh_token_rotated_behind_a_lapsed_claim_is_not_taken_for_a_revocation(
        oauth: OAuthFake, env: None, tmp_path: Path, backend: Backend, stores: Any) -> None:
    """Resident A's claim lapses (a stall) while B refreshes: A's refresh with the rotated-away token is
    refused, and A uses what B stored instead of signing the owner out."""
    cfg = make_config(tmp_path, backend, oauth)
    a, b = account_tokens(cfg, await stores("a")), account_tokens(cfg, await stores("b"))
    await a.save_sign_in("work", sign_in(oauth, "microsoft", left=timedelta(0)))
    stalled: list[str] = []

    async def lapse_and_let_b_refresh() -> None:
        if not stalled:
            stalled.append(await b.store.run(lambda db: db.execute("SELECT owner FROM leases").fetchone()[0]))
            await b.store.run(lambda db: db.execute("DELETE FROM leases"))  # A's lease lapsed
            stalled.append(await b.token("work", "mail"))

    with intercept("account.before_refresh", lapse_and_let_b_refresh):
        token = await a.token("work", "mail")
    assert stalled[0] == "a" and token == stalled[1] and live(oauth, token)
    assert oauth.calls["microsoft.token.refresh_token"] == 2  # B's, and A's refused one
    assert [s.state for s in await a.states()] == ["sign-in needed", "connected"]
    await a.store.run(lambda db: db.execute("UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))
    assert live(oauth, await a.token("work", "mail"))  # the stored (rotated) refresh token still works


async def test_a_process_killed_mid_refresh_leaves_the_claim_to_the_next_at_once(
        oauth: OAuthFake, env: None, tmp_path: Path, stores: Any) -> None:
    path = write_config(tmp_path, f'[store]\npath = "{tmp_path / "anyy.db"}"\n\n'
                        + account_toml("work", "microsoft", oauth.base_url, services=["calendar"]))
    cfg = load_config(path)
    accounts = account_tokens(cfg, await stores("a"))
    await accounts.save_sign_in("work", sign_in(oauth, "microsoft", left=timedelta(0)))
    child = Child(await asyncio.create_subprocess_exec(
        *ANYY, "accounts", "test", "work", "--config", path, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=os.environ | {"ANYY_HOME": str(tmp_path / "home"),
                                                          "ANYY_PAUSE_AT": "account.before_refresh"}))
    await child.wait_paused("account.before_refresh")  # the claim taken, the provider not asked
    await child.kill()
    holder = await accounts.store.run(lambda db: db.execute("SELECT owner FROM leases").fetchone()[0])
    assert holder.split("/")[1] == str(child.process.pid)
    started = asyncio.get_running_loop().time()
    token = await accounts.token("work", "calendar")
    assert asyncio.get_running_loop().time() - started < LEASE_S / 3  # not the lease's lapse: the holder is gone
    assert live(oauth, token) and oauth.calls["microsoft.token.refresh_token"] == 1
