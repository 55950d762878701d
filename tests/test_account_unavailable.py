"""An account that is signed in but cannot get an access token right now: its stored token has expired and
the provider's token endpoint is down, or refuses the OAuth client (its secret is not in secrets.env, as
when the owner exported it in a shell and the service never saw it). Nothing may reach a mail or calendar
server, an approved send must stay sendable, and the person reads one plain line; a refused client also
stops the account counting as connected (`anyy accounts list`, `anyy doctor`) until a refresh works again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import pytest

from connectors.oauth_token import TokenUnavailable
from gateway.config import Config, load_config, parse_config
from gateway.services.accounts import account_services
from store.db import Store
from store.drafts import Drafts
from tests.support.account_signin import SECRET_ENV, account_toml, secret_env
from tests.support.cli import anyy, model_config
from tests.support.context import RecordingContext
from tests.support.google_caldav import GoogleCalDAV
from tests.support.oauth_accounts import KEY, account, signed_in, tokens
from tests.support.oauth_mail import OAuthMail
from tests.support.oauth_provider import GOOGLE_CLIENT_SECRET, GOOGLE_USER, OAuthFake
from tests.support.tls_ca import FakeCA
from toolsets.base import Tool, ToolError
from toolsets.calendar import calendar_list, calendar_status
from toolsets.email import email_draft, email_search, email_send, email_status

Failure = Literal["down", "refused"]
WEEK = {"start": "2026-12-07T00:00", "end": "2026-12-14T00:00"}
NO_TOKEN = "account 'personal' cannot get an access token right now ("


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, fake_ca: FakeCA) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)


async def google_ctx(tmp_path: Path, store: Store, oauth: OAuthFake, user: str, **fields: Any) -> RecordingContext:
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db")},
                        "accounts": {"personal": account("google", oauth, **fields)}})
    cfg.data_dir = tmp_path / "data"
    services = account_services(cfg, store)
    await signed_in(services["accounts"], oauth, "personal", "google", user)
    return RecordingContext(store=store, services=services)


async def expire_stored_tokens(store: Store) -> None:
    """The access tokens are past their expiry by our books: the next use must refresh."""
    await store.run(lambda db: db.execute("UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))


def break_token_endpoint(failure: Failure, oauth: OAuthFake, monkeypatch: pytest.MonkeyPatch) -> None:
    if failure == "down":
        oauth.down.add("google.token")
    else:  # the secret is not in this process's environment: Google answers invalid_client
        monkeypatch.delenv(SECRET_ENV)


def mend_token_endpoint(failure: Failure, oauth: OAuthFake, monkeypatch: pytest.MonkeyPatch) -> None:
    oauth.down.clear()
    monkeypatch.setenv(SECRET_ENV, GOOGLE_CLIENT_SECRET)


async def state_of(ctx: RecordingContext) -> str:
    return str(next(s.state for s in await ctx.services["accounts"].states()))


@pytest.mark.parametrize("failure", ["down", "refused"])
async def test_an_approved_send_without_a_token_stays_sendable_and_a_retry_sends_it_once(
        tmp_path: Path, store: Store, oauth: OAuthFake, oauth_mail: OAuthMail, secrets: None,
        monkeypatch: pytest.MonkeyPatch, failure: Failure) -> None:
    user = f"unavailable-{failure}@gmail.example"
    ctx = await google_ctx(tmp_path, store, oauth, user, mail=oauth_mail, services=["email"])
    try:
        drafted = await call(email_draft, ctx, to=["ann@example.org"], subject="Figures", body="Attached.")
        draft_id = re.search(r"Draft (\w+) saved", drafted).group(1)  # type: ignore[union-attr]
        parsed = email_send.args_model.model_validate({"draft_id": draft_id})
        assert email_send.previewer is not None and email_send.effector is not None
        payload = (await email_send.previewer(ctx, parsed)).payload  # what the owner approves
        await expire_stored_tokens(store)
        break_token_endpoint(failure, oauth, monkeypatch)

        with pytest.raises(ToolError) as err:
            await email_send.effector(ctx, parsed, payload)  # the owner pressed Approve
        line = str(err.value)
        assert line.startswith(f"not sent: {NO_TOKEN}") and "\n" not in line, line
        assert line.endswith(f"(draft {draft_id} is kept: send it again then)"), line
        if failure == "refused":
            assert f"check that {SECRET_ENV} is set in secrets.env" in line, line
            assert await state_of(ctx) == "client refused"
        else:
            assert "try again later" in line and await state_of(ctx) == "connected"
        draft = await Drafts(store).get(ctx.user_key, draft_id)
        assert draft is not None and draft.state == "draft"
        assert oauth_mail.received == [] and oauth_mail.logins == []
        # Read tools say the same line, not "failed unexpectedly".
        with pytest.raises(ToolError, match=re.escape(NO_TOKEN)):
            await call(email_search, ctx, subject="x")
        assert (await call(email_status, ctx)).startswith(NO_TOKEN)

        mend_token_endpoint(failure, oauth, monkeypatch)
        sent = await email_send.effector(ctx, parsed, payload)  # the same approval, tried again
        assert str(sent).startswith('Sent "Figures" to ann@example.org'), sent
        assert [(s.user, s.rcpt_tos) for s in oauth_mail.received] == [(user, ["ann@example.org"])]
        assert await state_of(ctx) == "connected"  # a refresh that worked clears "client refused"
        with pytest.raises(ToolError, match="already sent"):
            await email_send.effector(ctx, parsed, payload)
        assert len(oauth_mail.received) == 1
    finally:
        await ctx.services["email"].aclose()


async def test_calendar_tools_answer_one_line_while_the_token_endpoint_is_down(
        tmp_path: Path, store: Store, oauth: OAuthFake, google_caldav: GoogleCalDAV, secrets: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = await google_ctx(tmp_path, store, oauth, "unavailable-cal@gmail.example", services=["calendar"],
                           caldav_url=google_caldav.url)
    try:
        await expire_stored_tokens(store)
        break_token_endpoint("down", oauth, monkeypatch)
        with pytest.raises(ToolError) as err:
            await call(calendar_list, ctx, **WEEK)
        assert str(err.value).startswith(NO_TOKEN) and "\n" not in str(err.value)
        assert (await call(calendar_status, ctx)).startswith(NO_TOKEN)
        assert google_caldav.requests == []  # nothing reached the calendar server
        mend_token_endpoint("down", oauth, monkeypatch)
        assert (await call(calendar_list, ctx, **WEEK)).startswith("No events from")
    finally:
        await ctx.services["calendar"].aclose()


async def test_doctor_and_list_name_a_missing_client_secret_and_a_refused_client(
        oauth: OAuthFake, model: Any, home: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    monkeypatch.setenv("ANYY_HOME", home["ANYY_HOME"])
    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = model_config(tmp_path, model, account_toml("personal", "google", oauth.base_url))
    cfg: Config = load_config(path)
    async with cfg.new_store() as store:
        accounts = tokens(cfg, store)
        await signed_in(accounts, oauth, "personal", "google", GOOGLE_USER)
        await expire_stored_tokens(store)
        with pytest.raises(TokenUnavailable):
            await accounts.token("personal", "mail")  # Google refuses a client without its secret
    env = home | {"ANYY_SECRET_KEY": KEY}
    secrets_file = tmp_path / "secrets.env"
    _, out, _ = await anyy("doctor", "--config", path, env=env)
    assert (f"✗ account: personal: {SECRET_ENV} is not set, so its access tokens cannot be refreshed: put "
            f"{SECRET_ENV}=<the OAuth client secret> in {secrets_file}, then restart Anyy") in out, out
    assert (f"✗ account: personal (google, {GOOGLE_USER}; email, calendar): client refused — check that "
            f"{SECRET_ENV} is set in secrets.env and client_id is right, then restart Anyy") in out, out
    _, listed, _ = await anyy("accounts", "list", "--config", path, env=env)
    assert "client refused" in listed and "connected" not in listed, listed
    # Exported in the shell only: the service would not have it.
    _, out, _ = await anyy("doctor", "--config", path, env=env | secret_env())
    assert f"! account: personal: {SECRET_ENV} is set in this shell but not in {secrets_file}" in out, out
    secrets_file.write_text(f"{SECRET_ENV}={GOOGLE_CLIENT_SECRET}\n")
    secrets_file.chmod(0o600)
    _, out, _ = await anyy("doctor", "--config", path, env=env)
    assert f"account: personal: {SECRET_ENV}" not in out, out
