"""What an account's state is, and what a person is told about it (`anyy accounts list`, `anyy doctor`,
the dashboard, the owners' notice). Nothing here holds or shows a token."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from gateway.config.accounts import AccountConfig, Service
from store.accounts import AccountRow

State = Literal["connected", "sign-in needed", "expired", "missing scopes", "client refused"]

# The scopes each service needs, as the provider names them in a token response. Microsoft may answer
# with the resource prefix or without it, so its names are compared by their last segment.
REQUIRED_SCOPES: dict[str, dict[Service, tuple[str, ...]]] = {
    "google": {"email": ("https://mail.google.com/",),
               "calendar": ("https://www.googleapis.com/auth/calendar",)},
    "microsoft": {"email": ("IMAP.AccessAsUser.All", "SMTP.Send"),
                  "calendar": ("Calendars.ReadWrite",)},
}


class AccountState(BaseModel):
    """One configured account as a person sees it."""

    name: str
    provider: str
    address: str | None
    services: list[Service]
    state: State
    missing: list[str] = []
    """The scopes the configured services need and the sign-in did not grant."""
    client_secret_env: str = ""
    """The variable holding the OAuth client's secret ("" for a public client)."""

    @property
    def reconnect(self) -> str | None:
        """The command that brings the account back, when it needs one (a refused client needs its
        configuration fixed instead: `fix`)."""
        return None if self.state in ("connected", "client refused") else reconnect_command(self.name)

    @property
    def fix(self) -> str | None:
        """What brings the account back, in a few words, when it needs anything."""
        if self.state == "client refused":
            return client_remedy(self.client_secret_env)
        return f"run `{self.reconnect}`" if self.reconnect else None

    @property
    def summary(self) -> str:
        """One line: "personal (google, me@gmail.com; email, calendar): connected"."""
        who = f", {self.address}" if self.address else ""
        line = f"{self.name} ({self.provider}{who}; {', '.join(self.services)}): {self.state}"
        if self.missing:
            line += f" (not granted: {', '.join(self.missing)})"
        return line + (f" — {self.fix}" if self.fix else "")


def reconnect_command(name: str) -> str:
    return f"anyy accounts add {name}"


def client_remedy(client_secret_env: str) -> str:
    """What to do when the provider refused the account's OAuth client (its secret is missing or wrong)."""
    where = f"that {client_secret_env} is set in secrets.env and " if client_secret_env else ""
    return f"check {where}client_id is right, then restart Anyy (docs/accounts.md)"


def missing_scopes(cfg: AccountConfig, granted: list[str], services: list[Service] | None = None) -> list[str]:
    """The scopes the account's services (or `services`) need that `granted` lacks (none when the provider
    did not say)."""
    if not granted:
        return []
    services = cfg.services if services is None else services
    if cfg.provider == "microsoft":
        have = {g.rsplit("/", 1)[-1].lower() for g in granted}
        return [s for svc in services for s in REQUIRED_SCOPES["microsoft"][svc] if s.lower() not in have]
    return [s for svc in services for s in REQUIRED_SCOPES["google"][svc] if s not in granted]


def account_state(name: str, cfg: AccountConfig, row: AccountRow | None) -> AccountState:
    """The state of a configured account given its row in the store (None: never signed in, or removed)."""
    missing: list[str] = []
    state: State
    if row is None:
        state = "sign-in needed"
    elif row.status in ("expired", "client refused"):
        state = row.status
    elif row.provider != cfg.provider:  # the table now names another provider than the one signed in to
        state = "sign-in needed"
    else:
        missing = missing_scopes(cfg, row.scopes)
        state = "missing scopes" if missing else "connected"
    return AccountState(name=name, provider=cfg.provider, address=row.address if row else None,
                        services=list(cfg.services), state=state, missing=missing,
                        client_secret_env=cfg.client_secret_env)


def expiry_notice(name: str, address: str | None) -> str:
    """What each owner is told, once, when the provider refuses an account's refresh token."""
    who = f" ({address})" if address else ""
    return (f"Your account {name!r}{who} was signed out by its provider (access revoked, or the sign-in "
            f"expired). Mail and calendar tools on it stop working until you reconnect it: run "
            f"`{reconnect_command(name)}` where Anyy runs.")
