"""The accounts' config, the key that seals their tokens, and the tokens' rows in the store (SQLite and
PostgreSQL). The refresh behaviour against an authorization server is tests/test_account_tokens.py."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from connectors.oauth_token import SignInNeeded
from gateway.accounts import AccountTokens
from gateway.accounts.grant import SignedIn, TokenGrant
from gateway.accounts.vault import KEY_ENV, Vault, VaultError
from gateway.config import Config, ConfigError, parse_config
from store.db import Store
from tests.support.postgres import Backend

pytestmark = pytest.mark.both_backends

GMAIL = "https://mail.google.com/"
GCAL = "https://www.googleapis.com/auth/calendar"
ACCESS, REFRESH = "ya29.access-SECRET-1", "1//refresh-SECRET-1"


def config(tmp_path: Path, backend: Backend, **accounts: dict[str, Any]) -> Config:
    accounts = accounts or {"personal": {"provider": "google", "client_id": "id.apps.googleusercontent.com"}}
    cfg = parse_config({"store": backend.store_section(str(tmp_path / "anyy.db")), "accounts": accounts})
    cfg.data_dir = tmp_path / "data"
    return cfg


def signed_in(scopes: list[str] | None = None, access: str = ACCESS, refresh: str = REFRESH,
              lifetime: timedelta = timedelta(hours=1)) -> SignedIn:
    grant = TokenGrant(access_token=SecretStr(access), expires_at=datetime.now(UTC) + lifetime)
    scopes = [GMAIL, GCAL] if scopes is None else scopes
    return SignedIn(address="owner@gmail.example", refresh_token=SecretStr(refresh),
                    grants={"mail": grant, "calendar": grant}, scopes=scopes)


@pytest.fixture
async def opened(tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(KEY_ENV, raising=False)
    cfg = config(tmp_path, backend)
    store = await cfg.new_store().open()
    yield cfg, store
    await store.close()


def tokens(cfg: Config, store: Store, key: str | None = None) -> AccountTokens:
    return AccountTokens(cfg, store, Vault(cfg.data_dir, key))


# -- config -------------------------------------------------------------------------------------------

@pytest.mark.sqlite_only
@pytest.mark.parametrize(("accounts", "extra", "says"), [
    ({"Work Mail": {"provider": "google", "client_id": "x"}}, {}, "account name 'Work Mail' is not valid"),
    ({"work": {"provider": "yahoo", "client_id": "x"}}, {}, "[accounts.work.provider] Input should be 'google'"),
    ({"work": {"provider": "google"}}, {}, "[accounts.work.client_id] Field required"),
    ({"work": {"provider": "google", "client_id": " "}}, {}, "client_id is empty"),
    ({"work": {"provider": "google", "client_id": "x", "tenant": "contoso"}}, {}, "tenant is for microsoft"),
    ({"work": {"provider": "google", "client_id": "x", "services": ["email", "fax"]}}, {},
     "[accounts.work.services.1] Input should be 'email' or 'calendar'"),
    ({"work": {"provider": "google", "client_id": "x", "imap_hots": "h"}}, {}, "[accounts.work.imap_hots] unknown key"),
    ({"default": {"provider": "microsoft", "client_id": "x", "services": ["calendar"]}},
     {"calendar": {"url": "https://dav.example/"}},
     "the name 'default' is used by both [calendar] and [accounts.default] for calendar"),
])
def test_config_errors_are_readable(accounts: dict[str, Any], extra: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"accounts": accounts, **extra}, "config.toml")
    assert says in str(caught.value)
    assert str(caught.value).startswith("config.toml: invalid configuration:")


@pytest.mark.sqlite_only
def test_config_fills_each_providers_documented_endpoints() -> None:
    cfg = parse_config({
        "email": {"name": "fastmail", "imap_host": "i", "smtp_host": "s", "username": "u", "from_address": "a@b"},
        "accounts": {"default": {"provider": "microsoft", "client_id": "c", "tenant": "contoso.example"},
                     "personal": {"provider": "google", "client_id": "g", "services": ["calendar"],
                                  "token_url": "https://127.0.0.1:9/token"}}})
    ms, google = cfg.accounts["default"], cfg.accounts["personal"]
    assert ms.token_url == "https://login.microsoftonline.com/contoso.example/oauth2/v2.0/token"
    assert ms.device_code_url.endswith("/contoso.example/oauth2/v2.0/devicecode")
    assert (ms.smtp_host, ms.smtp_port, ms.smtp_security, ms.revoke_url) == ("smtp.office365.com", 587, "starttls", "")
    assert ms.graph_url == "https://graph.microsoft.com/v1.0" and ms.resources == ["mail", "calendar"]
    assert google.token_url == "https://127.0.0.1:9/token"  # an override stays
    assert google.caldav_url == "https://apidata.googleusercontent.com/caldav/v2/"
    assert (google.imap_host, google.smtp_port) == ("imap.gmail.com", 465) and google.resources == ["calendar"]


@pytest.mark.sqlite_only
def test_client_secret_comes_from_its_variable_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config({"accounts": {"p": {"provider": "google", "client_id": "g", "client_secret_env": "G_SECRET"},
                                     "w": {"provider": "microsoft", "client_id": "m"}}})
    monkeypatch.delenv("G_SECRET", raising=False)
    assert cfg.accounts["p"].client_secret() is None and cfg.accounts["w"].client_secret() is None
    monkeypatch.setenv("G_SECRET", "GOCSPX-x")
    assert cfg.accounts["p"].client_secret() == "GOCSPX-x"
    assert {"G_SECRET", "ANYY_SECRET_KEY"} <= cfg.secret_env_names()  # redacted from logs and output


# -- the key ------------------------------------------------------------------------------------------

@pytest.mark.sqlite_only
@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_key_file_is_0600_from_creation(tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real_open = os.open

    def watching_open(path: Any, flags: int, mode: int = 0o777, *a: Any, **kw: Any) -> int:
        fd = real_open(path, flags, mode, *a, **kw)
        if flags & os.O_CREAT:
            seen.append(stat.S_IMODE(os.fstat(fd).st_mode))  # the mode the file was born with
        return fd

    monkeypatch.setattr(os, "open", watching_open)
    old = os.umask(umask)
    try:
        Vault(tmp_path / "data", "").encrypt("x")
    finally:
        os.umask(old)
        monkeypatch.undo()
    key_file = tmp_path / "data" / "secret.key"
    assert seen == [0o600]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in key_file.parent.iterdir()] == ["secret.key"]  # no temporary file left behind
    Fernet(key_file.read_bytes().strip())  # a valid Fernet key


@pytest.mark.sqlite_only
def test_two_processes_creating_the_key_at_once_share_one(tmp_path: Path) -> None:
    vaults = [Vault(tmp_path, "") for _ in range(8)]
    sealed: list[str] = []
    start = threading.Barrier(len(vaults))

    def seal(vault: Vault) -> None:
        start.wait()
        sealed.append(vault.encrypt("hello"))

    threads = [threading.Thread(target=seal, args=(v,)) for v in vaults]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = Vault(tmp_path, "")
    assert [reader.decrypt(s) for s in sealed] == ["hello"] * len(vaults)


@pytest.mark.sqlite_only
def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    Vault(tmp_path, "").encrypt("x")
    (tmp_path / "secret.key").chmod(0o644)
    with pytest.raises(VaultError, match=r"open to other users \(mode 0644\): run chmod 600"):
        Vault(tmp_path, "").encrypt("x")


@pytest.mark.sqlite_only
def test_a_malformed_env_key_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(VaultError) as caught:
        Vault(tmp_path, "not-a-key").encrypt("x")
    assert "ANYY_SECRET_KEY is not a key: it must be 32 random bytes in URL-safe base64" in str(caught.value)
    assert "not-a-key" not in str(caught.value)
    assert not (tmp_path / "secret.key").exists()  # the env key is used, never a file beside it


@pytest.mark.sqlite_only
def test_env_key_takes_precedence_over_the_file(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    sealed = Vault(tmp_path, key).encrypt("x")
    assert not (tmp_path / "secret.key").exists()
    assert Fernet(key.encode()).decrypt(sealed.encode()) == b"x"


# -- tokens in the store ------------------------------------------------------------------------------

async def test_tokens_are_stored_sealed_and_served_back(opened: Any) -> None:
    cfg, store = opened
    accounts = tokens(cfg, store)
    assert [s.state for s in await accounts.states()] == ["sign-in needed"]
    await accounts.save_sign_in("personal", signed_in())
    assert await accounts.token("personal", "mail") == ACCESS
    assert await accounts.address("personal") == "owner@gmail.example"
    dump = await store.run(lambda db: repr([db.execute(f"SELECT * FROM {t}").fetchall()
                                            for t in ("accounts", "account_tokens")]))
    assert "owner@gmail.example" in dump and ACCESS not in dump and REFRESH not in dump
    state = (await accounts.states())[0]
    assert (state.state, state.address, state.reconnect) == ("connected", "owner@gmail.example", None)
    assert ACCESS not in repr(state) and REFRESH not in repr(state)


async def test_a_new_accounttokens_on_the_same_store_serves_the_token(opened: Any) -> None:
    """A restart: the tokens are the store's, not the process's."""
    cfg, store = opened
    await tokens(cfg, store).save_sign_in("personal", signed_in())
    assert await tokens(cfg, store).token("personal", "calendar") == ACCESS


async def test_a_changed_key_is_a_clear_error_naming_the_cure(opened: Any) -> None:
    cfg, store = opened
    await tokens(cfg, store, Fernet.generate_key().decode()).save_sign_in("personal", signed_in())
    other = tokens(cfg, store, Fernet.generate_key().decode())
    with pytest.raises(SignInNeeded) as caught:
        await other.token("personal", "mail")
    text = str(caught.value)
    assert "encrypted with another key than $ANYY_SECRET_KEY (was the key changed or lost?)" in text
    assert "anyy accounts add personal" in text and "\n" not in text
    assert ACCESS not in text and REFRESH not in text
    assert "was the key changed" in (await other.key_problem() or "")
    assert await tokens(cfg, store).key_problem() is not None  # no env key: the (absent) key file
    assert await other.forget("personal") is None  # removal works even when the key is lost
    assert [s.state for s in await other.states()] == ["sign-in needed"]


async def test_a_key_file_deleted_after_sign_in_is_a_clear_error(opened: Any) -> None:
    cfg, store = opened
    await tokens(cfg, store).save_sign_in("personal", signed_in())
    (cfg.data_dir / "secret.key").unlink()
    with pytest.raises(SignInNeeded, match=r"there is no key file .*secret\.key .*restore it, or sign in again"):
        await tokens(cfg, store).token("personal", "mail")
    assert not (cfg.data_dir / "secret.key").exists()  # reading never creates a new key


async def test_missing_scopes_and_the_service_they_block(opened: Any) -> None:
    cfg, store = opened
    accounts = tokens(cfg, store)
    await accounts.save_sign_in("personal", signed_in(scopes=[GMAIL, "openid", "email"]))
    state = (await accounts.states())[0]
    assert (state.state, state.missing, state.reconnect) == ("missing scopes", [GCAL], "anyy accounts add personal")
    assert await accounts.token("personal", "mail") == ACCESS
    with pytest.raises(SignInNeeded, match="the sign-in did not grant calendar access"):
        await accounts.token("personal", "calendar")


async def test_a_second_sign_in_replaces_the_first_and_forget_returns_the_refresh_token(opened: Any) -> None:
    cfg, store = opened
    accounts = tokens(cfg, store)
    await accounts.save_sign_in("personal", signed_in())
    await accounts.save_sign_in("personal", signed_in(access="ya29.second", refresh="1//second"))
    assert await accounts.token("personal", "mail") == "ya29.second"
    assert await accounts.forget("personal") == "1//second"
    assert await accounts.forget("personal") is None
    with pytest.raises(SignInNeeded, match=r"account 'personal' needs signing in again \(not signed in\)"):
        await accounts.token("personal", "mail")


async def test_unknown_account_or_service_is_refused(opened: Any) -> None:
    cfg, store = opened
    accounts = tokens(cfg, store)
    with pytest.raises(ValueError, match="no account named 'work' is configured"):
        accounts.provider("work", "mail")
    cfg.accounts["personal"].services = ["email"]
    with pytest.raises(ValueError, match="account 'personal' is not configured for calendar"):
        await accounts.token("personal", "calendar")
