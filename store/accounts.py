"""OAuth accounts: one row per signed-in account, one per access token it holds.

Every secret column holds Fernet ciphertext (gateway/accounts/vault.py encrypts before it reaches here):
the store never sees a token in clear, so a dump of the database or a PostgreSQL log holds none. The rest
(address, state, scopes, expiry) is plain, for `anyy accounts list`, `anyy doctor` and the dashboard.

`generation` counts sign-ins: a refresh or an expiry is written only if the row is still the sign-in it
started from, so a refresh finishing after a new `anyy accounts add` never overwrites the new tokens,
and the owners' notice of an expiry is sent once per sign-in (`notified` catches up with `generation`).
Expiry times are by the database's clock (`Store.now`), as lease times are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from store.records import Record

AccountStatus = Literal["connected", "expired", "client refused"]

_SCHEMA = """
CREATE TABLE accounts (
    name TEXT PRIMARY KEY,              -- [accounts.NAME]
    provider TEXT NOT NULL,             -- google | microsoft
    address TEXT NOT NULL,              -- learned at sign-in
    status TEXT NOT NULL,               -- connected | expired (the provider refused the refresh token)
                                        -- | client refused (it refused the OAuth client: until a refresh works)
    scopes TEXT NOT NULL,               -- JSON list, as granted
    refresh_token TEXT NOT NULL,        -- Fernet ciphertext
    generation INTEGER NOT NULL,        -- bumped by every sign-in
    notified INTEGER NOT NULL DEFAULT 0,  -- the generation whose expiry the owners were told of
    signed_in_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE account_tokens (
    account TEXT NOT NULL REFERENCES accounts(name) ON DELETE CASCADE,
    resource TEXT NOT NULL,             -- mail | calendar
    access_token TEXT NOT NULL,         -- Fernet ciphertext
    expires_at TEXT NOT NULL,           -- by the database's clock
    PRIMARY KEY (account, resource)
);
"""


def m017_accounts(db: Any) -> None:
    """OAuth accounts and their encrypted tokens (the same on SQLite and PostgreSQL)."""
    db.executescript(_SCHEMA)


class AccountRow(Record):
    name: str
    provider: str
    address: str
    status: AccountStatus
    scopes: list[str]
    refresh_token: str  # ciphertext
    generation: int
    notified: int
    signed_in_at: str
    updated_at: str


class AccessRow(Record):
    account: str
    resource: str
    access_token: str  # ciphertext
    expires_at: str


def _account(row: dict[str, Any]) -> AccountRow:
    return AccountRow(**{**row, "scopes": json.loads(row["scopes"])})


def get_account(db: Any, name: str) -> AccountRow | None:
    rows = db.execute_returning_dicts("SELECT * FROM accounts WHERE name = ?", [name])
    return _account(rows[0]) if rows else None


def all_accounts(db: Any) -> list[AccountRow]:
    return [_account(r) for r in db.execute_returning_dicts("SELECT * FROM accounts ORDER BY name")]


def get_access(db: Any, name: str, resource: str) -> tuple[AccountRow, AccessRow | None] | None:
    """The account and its token for `resource` (None when it has none yet), in one statement pair."""
    account = get_account(db, name)
    if account is None:
        return None
    rows = db.execute_returning_dicts("SELECT * FROM account_tokens WHERE account = ? AND resource = ?",
                                      [name, resource])
    return account, (AccessRow(**rows[0]) if rows else None)


def save_sign_in(db: Any, *, name: str, provider: str, address: str, scopes: list[str], refresh_token: str,
                 access: Mapping[str, tuple[str, str]], now: str) -> int:
    """Replace the account's tokens with a new sign-in's (`access`: resource -> (ciphertext, expires_at));
    returns its generation."""
    with db.atomic():
        row = db.execute(
            "INSERT INTO accounts (name, provider, address, status, scopes, refresh_token, generation, notified,"
            " signed_in_at, updated_at) VALUES (?, ?, ?, 'connected', ?, ?, 1, 0, ?, ?) ON CONFLICT (name) DO UPDATE"
            " SET provider = excluded.provider, address = excluded.address, status = 'connected',"
            " scopes = excluded.scopes, refresh_token = excluded.refresh_token,"
            " generation = accounts.generation + 1, notified = accounts.generation + 1,"
            " signed_in_at = excluded.signed_in_at, updated_at = excluded.updated_at RETURNING generation",
            [name, provider, address, json.dumps(scopes), refresh_token, now, now]).fetchone()
        db.execute("DELETE FROM account_tokens WHERE account = ?", [name])
        for resource, (token, expires_at) in access.items():
            db.execute("INSERT INTO account_tokens (account, resource, access_token, expires_at) VALUES (?, ?, ?, ?)",
                       [name, resource, token, expires_at])
    return int(row[0])


def save_refresh(db: Any, *, name: str, generation: int, resources: Sequence[str], access_token: str,
                 expires_at: str, refresh_token: str | None, now: str) -> bool:
    """Store a refreshed access token for `resources` (and the rotated refresh token, when the provider sent
    one) if the account is still at `generation`, and mark it connected again (a refused client works
    again); False when a sign-in, a removal or an expiry came in between."""
    with db.atomic():
        cur = db.execute(
            "UPDATE accounts SET refresh_token = coalesce(?, refresh_token), status = 'connected', updated_at = ?"
            " WHERE name = ? AND generation = ? AND status <> 'expired'",
            [refresh_token, now, name, generation])
        if cur.rowcount != 1:
            return False
        for resource in resources:
            db.execute(
                "INSERT INTO account_tokens (account, resource, access_token, expires_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (account, resource) DO UPDATE SET access_token = excluded.access_token,"
                " expires_at = excluded.expires_at", [name, resource, access_token, expires_at])
    return True


def mark_expired(db: Any, name: str, generation: int, refresh_token: str, now: str) -> bool:
    """The provider refused the refresh token `refresh_token` (ciphertext) of sign-in `generation`: the
    account is expired and its tokens are gone. True only for the call that made the change; False when
    the others find it done, or the row holds another refresh token (rotated by a refresh in between)."""
    with db.atomic():
        cur = db.execute("UPDATE accounts SET status = 'expired', refresh_token = '', updated_at = ?"
                         " WHERE name = ? AND generation = ? AND status <> 'expired' AND refresh_token = ?",
                         [now, name, generation, refresh_token])
        if cur.rowcount != 1:
            return False
        db.execute("DELETE FROM account_tokens WHERE account = ?", [name])
    return True


def mark_client_refused(db: Any, name: str, generation: int, now: str) -> bool:
    """The provider refused the OAuth client when sign-in `generation` was refreshed: the account's tokens
    stay (fixing the client's secret and restarting brings it back), but it no longer counts as connected.
    True when this call made the change."""
    cur = db.execute("UPDATE accounts SET status = 'client refused', updated_at = ?"
                     " WHERE name = ? AND generation = ? AND status = 'connected'", [now, name, generation])
    return bool(cur.rowcount == 1)


def unnotified(db: Any) -> list[tuple[str, int]]:
    """Expired accounts whose owners have not been told yet: (name, generation)."""
    rows = db.execute("SELECT name, generation FROM accounts WHERE status = 'expired' AND notified < generation"
                      " ORDER BY name").fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def mark_notified(db: Any, name: str, generation: int) -> None:
    db.execute("UPDATE accounts SET notified = ? WHERE name = ? AND notified < ?", [generation, name, generation])


def delete_account(db: Any, name: str) -> str | None:
    """Forget the account; returns its refresh token's ciphertext (to revoke), None when there was none."""
    with db.atomic():
        row = db.execute("SELECT refresh_token FROM accounts WHERE name = ?", [name]).fetchone()
        db.execute("DELETE FROM account_tokens WHERE account = ?", [name])
        db.execute("DELETE FROM accounts WHERE name = ?", [name])
    return str(row[0]) if row and row[0] else None
