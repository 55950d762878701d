"""An account signed out by its provider is told to the owners' chats (gateway.access.owner_chats, as
budget warnings are): with no Telegram or Slack owner configured, the owner at the console hears of it.
(Telegram and Slack owners, once per sign-in across residents: tests/test_account_tokens.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from connectors.oauth_token import SignInNeeded
from gateway.accounts import AccountTokens
from gateway.surfaces.console import CHAT_ID
from store.db import Store
from tests.support.account_signin import secret_env
from tests.support.oauth_accounts import KEY, account, signed_in
from tests.support.oauth_provider import OAuthFake


async def expiry_rows(store: Store) -> list[tuple[str, str]]:
    return await store.run(lambda db: db.execute(
        "SELECT surface, chat_id FROM outbox WHERE dedupe_key LIKE 'account-expired:%'").fetchall())


async def test_an_owner_who_only_uses_the_console_hears_that_an_account_expired(
        oauth: OAuthFake, start_console: Any, make_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYY_SECRET_KEY", KEY)
    for key, value in secret_env().items():
        monkeypatch.setenv(key, value)
    cfg = make_config(accounts={"personal": account("google", oauth)})
    h = await start_console(cfg)
    accounts: AccountTokens = h.gw.services["accounts"]
    user = f"console-{uuid.uuid4().hex[:8]}@gmail.example"
    await signed_in(accounts, oauth, "personal", "google", user)
    oauth.revoke(user)
    await h.gw.store.run(lambda db: db.execute(
        "UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00+00:00'"))  # due: the refresh is refused
    with pytest.raises(SignInNeeded):
        await accounts.token("personal", "mail")
    shown = await h.wait_for("`anyy accounts add personal`")
    assert user in shown
    assert [tuple(row) for row in await expiry_rows(h.gw.store)] == [("console", CHAT_ID)]
    assert await accounts.unnotified() == []
    await h.gw.stop()
    again = await start_console(cfg)  # a restart does not repeat it
    assert len(await expiry_rows(again.gw.store)) == 1
    assert "anyy accounts add" not in again.new_output()
