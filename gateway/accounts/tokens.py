"""Access tokens that look after themselves: served from the store while valid, refreshed before expiry,
once across every resident sharing the store.

A refresh is a claim like any other (docs/scale.md): the named lease `account-refresh:<NAME>`, taken by a
conditional write and timed by the database's clock. Whoever takes it reads the row again first, so a
resident that waited behind another one's refresh uses the token that refresh stored instead of spending
the refresh token a second time (Microsoft rotates refresh tokens and kills the one used: a second refresh
with it would sign the owner out). Every write is conditional on the sign-in it started from, so a refresh
finishing after `anyy accounts add` never overwrites the new sign-in.

A token a server refused before its recorded expiry (revoked, Microsoft's continuous access evaluation,
cut off early) is reported by the connector (`token(..., refused=TOKEN)`): it is not served again but
refreshed under the same claim, unless the store already holds another token (a resident refreshed it
meanwhile), which is served instead.

A refresh the provider refuses (`GrantRefused`: revoked, expired, a Google app left in Testing) marks the
account expired; `on_expired` is then called so the gateway tells each owner once, and every later call
raises `SignInNeeded`. A refresh that cannot be had right now (the token endpoint unreachable, or
refusing the OAuth client: `ClientRefused`, a secret missing from secrets.env) raises `TokenUnavailable`
while the stored token is past use, so a tool knows nothing went out; a refused client also marks the
account "client refused" until a refresh works again. Nothing here logs, raises or returns a token except
`token()` itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from connectors.oauth_token import SignInNeeded, TokenProvider, TokenUnavailable
from gateway.accounts.grant import ClientRefused, GrantRefused, OAuthError, SignedIn, TokenGrant
from gateway.accounts.providers import OAuthProvider, oauth_provider
from gateway.accounts.state import AccountState, account_state, client_remedy, missing_scopes
from gateway.accounts.vault import Vault, VaultError
from gateway.checkpoints import reached
from gateway.config import AccountConfig, Config
from gateway.config.accounts import Resource, Service
from store import accounts as rows
from store.claims import Claims
from store.leases import LEASE_S
from store.records import iso, parse_iso, utcnow

if TYPE_CHECKING:
    from store.db import Store

log = logging.getLogger(__name__)

REFRESH_MARGIN = timedelta(minutes=5)  # an access token this close to its expiry is refreshed first
USABLE_MARGIN = timedelta(seconds=30)  # a token closer to its expiry may die mid-request: not served
CLAIM_POLL_S = 0.1  # how often a resident waiting behind another one's refresh looks again
CLAIM_WAIT_S = 2 * LEASE_S  # beyond this the other refresh is stuck (its lease lapses after LEASE_S)

REFUSED = "its provider refused the sign-in: access revoked or expired"
_SERVICE: dict[Resource, Service] = {"mail": "email", "calendar": "calendar"}


@dataclass
class _Current:
    """What the store holds for one account and resource, decrypted on the store thread."""

    generation: int
    refresh_sealed: str  # the refresh token's ciphertext: the expiry is conditional on it
    access: str | None  # the access token, when it is valid beyond REFRESH_MARGIN
    refresh: str  # the refresh token (used only when `access` is None)
    usable: str | None = None  # the access token while it still works (served when a refresh fails)


class AccountTokens:
    """The accounts of one process; tools reach it as `services["accounts"]`."""

    def __init__(self, config: Config, store: Store, vault: Vault) -> None:
        self.configs = config.accounts
        self.store = store
        self.vault = vault
        self._providers: dict[str, OAuthProvider] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._claims = Claims(store)
        # Called after this process marked an account expired; the gateway tells the owners (app.py).
        self.on_expired: Callable[[], Awaitable[object]] | None = None

    # -- tokens -----------------------------------------------------------------------------------

    async def token(self, account: str, resource: Resource, refused: str | None = None) -> str:
        """A valid access token for `account` and `resource`, refreshed first when it expires within
        REFRESH_MARGIN or when it is `refused` (a server has just refused it). Raises SignInNeeded when
        only a new sign-in helps, TokenUnavailable when no token can be had right now (the token endpoint
        unreachable or refusing the OAuth client; the sign-in stays)."""
        cfg = self._config(account, resource)
        current = await self.store.run(functools.partial(self._read, account, resource, refused))
        if current.access is not None:
            return current.access
        lock = self._locks.setdefault(account, asyncio.Lock())  # one refresh at a time in this process
        async with lock:
            return await self._refresh(cfg, account, resource, refused)

    def provider(self, account: str, resource: Resource) -> TokenProvider:
        """The token provider a connector is given for `account` and `resource`."""
        self._config(account, resource)

        async def token(refused: str | None = None) -> str:
            return await self.token(account, resource, refused)

        return token

    async def _refresh(self, cfg: AccountConfig, account: str, resource: Resource, refused: str | None) -> str:
        claim = f"account-refresh:{account}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLAIM_WAIT_S
        while (holder := await self._claims.take(claim)) is not None:
            # Another resident is refreshing this account: use the token it stores.
            current = await self.store.run(functools.partial(self._read, account, resource, refused))
            if current.access is not None:
                return current.access
            if loop.time() > deadline:
                raise TokenUnavailable(account, f"another resident has been refreshing its token for"
                                                f" {CLAIM_WAIT_S:.0f} s")
            log.debug("account_refresh_waiting account=%s holder=%s", account, holder)
            await asyncio.sleep(CLAIM_POLL_S)
        try:
            # Read again under the claim: another resident may have refreshed while we looked.
            current = await self.store.run(functools.partial(self._read, account, resource, refused))
            if current.access is not None:
                return current.access
            grant = None
            for retry in (True, False):
                await reached("account.before_refresh")
                try:
                    grant = await self._provider(cfg, account).refresh(current.refresh, resource)
                    break
                except GrantRefused:
                    if await self._expire(account, current) or not retry:
                        raise SignInNeeded(account, REFUSED) from None
                    # The store holds another refresh token than the one refused (rotated by a resident
                    # whose claim lapsed, or a new sign-in): once more with that one.
                    current = await self.store.run(functools.partial(self._read, account, resource, refused))
                    if current.access is not None:
                        return current.access
                except OAuthError as exc:
                    remedy = "try again later"
                    if isinstance(exc, ClientRefused):
                        await self._client_refused(account, current)
                        remedy = client_remedy(cfg.client_secret_env)
                    if current.usable is None:
                        raise TokenUnavailable(account, str(exc), remedy) from None
                    log.warning("account_refresh_failed account=%s resource=%s using=current_token", account,
                                resource)
                    return current.usable
            assert grant is not None  # the loop either broke with a grant or left by raise/return
            await self.store.run(functools.partial(self._save_refresh, account, resource, current.generation, grant))
            log.info("account_token_refreshed account=%s resource=%s rotated=%s", account, resource,
                     grant.refresh_token is not None)
            return grant.access_token.get_secret_value()
        finally:
            await self._claims.release(claim)

    def _read(self, account: str, resource: Resource, refused: str | None, db: Any) -> _Current:
        """On the store thread: the account's row, its tokens decrypted (or SignInNeeded); a `refused`
        access token counts as none."""
        found = rows.get_access(db, account, resource)
        if found is None:
            raise SignInNeeded(account, "not signed in")
        row, access = found
        if row.status == "expired":
            raise SignInNeeded(account, REFUSED)
        cfg = self.configs[account]
        if row.provider != cfg.provider:
            raise SignInNeeded(account, f"signed in to {row.provider}, configured for {cfg.provider}")
        service = _SERVICE[resource]
        if missing_scopes(cfg, row.scopes, [service]):
            raise SignInNeeded(account, f"the sign-in did not grant {service} access")
        try:
            left = parse_iso(access.expires_at) - self.store.now() if access is not None else timedelta(0)
            stored = self.vault.decrypt(access.access_token) if access is not None and left > USABLE_MARGIN else None
            if stored == refused:
                stored = None  # a server refused it: refresh, and never serve it again
            if stored is not None and left > REFRESH_MARGIN:
                return _Current(row.generation, row.refresh_token, stored, "")
            return _Current(row.generation, row.refresh_token, None, self.vault.decrypt(row.refresh_token), stored)
        except VaultError as exc:
            raise SignInNeeded(account, str(exc)) from None

    def _save_refresh(self, account: str, resource: Resource, generation: int, grant: TokenGrant, db: Any) -> None:
        rotated = grant.refresh_token.get_secret_value() if grant.refresh_token else None
        # Google's access token carries every scope granted (mail and calendar): one refresh serves all
        # the account's resources. Microsoft's is for one resource (Outlook or Graph) only.
        cfg = self.configs[account]
        resources = cfg.resources if cfg.provider == "google" else [resource]
        saved = rows.save_refresh(
            db, name=account, generation=generation, resources=resources,
            access_token=self.vault.encrypt(grant.access_token.get_secret_value()),
            expires_at=self._db_time(grant), refresh_token=self.vault.encrypt(rotated) if rotated else None,
            now=iso(self.store.now()))
        if not saved:  # signed in again, removed or expired meanwhile: the store's state wins
            log.info("account_refresh_superseded account=%s resource=%s", account, resource)

    def _db_time(self, grant: TokenGrant) -> str:
        """The grant's expiry by the database's clock (it was computed by this host's)."""
        return iso(grant.expires_at + (self.store.now() - utcnow()))

    async def _expire(self, account: str, current: _Current) -> bool:
        """Mark the account expired if the store still holds the refused refresh token; True if this did."""
        now = iso(self.store.now())
        changed = await self.store.run(
            lambda db: rows.mark_expired(db, account, current.generation, current.refresh_sealed, now))
        if not changed:
            return False
        log.warning("account_expired account=%s reason=invalid_grant", account)
        if self.on_expired is not None:
            try:
                await self.on_expired()
            except Exception:  # the notice is retried at the next start (`unnotified`)
                log.exception("account_expiry_notice_failed account=%s", account)
        return True

    async def _client_refused(self, account: str, current: _Current) -> None:
        """Mark the account "client refused" (its tokens stay): `anyy accounts list` and `anyy doctor`
        stop calling it connected until a refresh works again."""
        now = iso(self.store.now())
        if await self.store.run(lambda db: rows.mark_client_refused(db, account, current.generation, now)):
            log.warning("account_client_refused account=%s", account)

    def _provider(self, cfg: AccountConfig, account: str) -> OAuthProvider:
        provider = self._providers.get(account)
        if provider is None:
            provider = self._providers[account] = oauth_provider(cfg)
        return provider

    def _config(self, account: str, resource: Resource) -> AccountConfig:
        cfg = self.configs.get(account)
        if cfg is None:
            raise ValueError(f"no account named {account!r} is configured (names: {', '.join(self.configs) or 'none'})")
        if resource not in cfg.resources:
            raise ValueError(f"account {account!r} is not configured for {_SERVICE[resource]}")
        return cfg

    # -- sign-in, removal, state ----------------------------------------------------------------------

    async def save_sign_in(self, account: str, signed_in: SignedIn) -> None:
        """Store a new sign-in (creating the key file at the first one), replacing the account's tokens."""
        cfg = self.configs[account]

        def op(db: Any) -> int:
            access: dict[str, tuple[str, str]] = {
                resource: (self.vault.encrypt(grant.access_token.get_secret_value()), self._db_time(grant))
                for resource, grant in signed_in.grants.items()}
            return rows.save_sign_in(db, name=account, provider=cfg.provider, address=signed_in.address,
                                     scopes=signed_in.scopes,
                                     refresh_token=self.vault.encrypt(signed_in.refresh_token.get_secret_value()),
                                     access=access, now=iso(self.store.now()))

        generation = await self.store.run(op)
        log.info("account_signed_in account=%s provider=%s generation=%d", account, cfg.provider, generation)

    async def forget(self, account: str) -> str | None:
        """Delete the account's tokens; returns its refresh token (to revoke), None when there is none or
        it cannot be decrypted (the key changed: the tokens go anyway)."""

        def op(db: Any) -> str | None:
            sealed = rows.delete_account(db, account)
            if sealed is None:
                return None
            try:
                return self.vault.decrypt(sealed)
            except VaultError:
                return None

        return await self.store.run(op)

    async def address(self, account: str) -> str | None:
        row = await self.store.run(lambda db: rows.get_account(db, account))
        return row.address if row else None

    async def states(self) -> list[AccountState]:
        """Every configured account, in config order, with its state (no token is read)."""
        found = {r.name: r for r in await self.store.run(rows.all_accounts)}
        return [account_state(name, cfg, found.get(name)) for name, cfg in self.configs.items()]

    async def key_problem(self) -> str | None:
        """Why the stored tokens cannot be decrypted with this process's key, or None (for `anyy doctor`)."""

        def op(db: Any) -> str | None:
            sealed = next((r.refresh_token for r in rows.all_accounts(db) if r.refresh_token), None)
            if sealed is None:
                return None
            try:
                self.vault.decrypt(sealed)
            except VaultError as exc:
                return str(exc)
            return None

        return await self.store.run(op)

    # -- owners' notices --------------------------------------------------------------------------

    async def unnotified(self) -> list[tuple[str, str | None, int]]:
        """Expired accounts whose owners have not been told: (name, address, generation)."""

        def op(db: Any) -> list[tuple[str, str | None, int]]:
            return [(name, row.address if (row := rows.get_account(db, name)) else None, generation)
                    for name, generation in rows.unnotified(db)]

        return await self.store.run(op)

    async def notified(self, account: str, generation: int) -> None:
        await self.store.run(lambda db: rows.mark_notified(db, account, generation))


def account_tokens(config: Config, store: Store) -> AccountTokens:
    """The process's account service: tokens in `store`, sealed with ANYY_SECRET_KEY or the key file in
    the data directory."""
    return AccountTokens(config, store, Vault(config.data_dir))
