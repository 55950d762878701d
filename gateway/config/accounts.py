"""`[accounts.NAME]`: an OAuth 2.0 account (Google or Microsoft) serving email, calendar or both.

The table holds the owner's own OAuth client (its id; the secret only by environment variable) and the
services to use; every endpoint defaults to the provider's documented one and may be overridden (tests,
national clouds). Tokens never appear here: they live encrypted in the store (gateway/accounts).
"""

# No `from __future__ import annotations`: pydantic evaluates these annotations at class creation.
import os
import re
from typing import Literal

from pydantic import Field, model_validator

from gateway.config.base import Section

Resource = Literal["mail", "calendar"]
"""What a token is for: Microsoft issues one per resource (Outlook for mail, Graph for calendar)."""
Service = Literal["email", "calendar"]
SERVICES: tuple[Service, ...] = ("email", "calendar")

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
NAME_RULE = "1-32 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit"

_GOOGLE = {
    "authorize_url": "https://accounts.google.com/o/oauth2/v2/auth",
    "token_url": "https://oauth2.googleapis.com/token",
    "device_code_url": "",  # Google's device flow does not allow the Gmail scope: never used
    "revoke_url": "https://oauth2.googleapis.com/revoke",
    "userinfo_url": "https://openidconnect.googleapis.com/v1/userinfo",
    "imap_host": "imap.gmail.com", "imap_port": 993,
    "smtp_host": "smtp.gmail.com", "smtp_port": 465, "smtp_security": "ssl",
    "caldav_url": "https://apidata.googleusercontent.com/caldav/v2/",
    "graph_url": "",
    "auth_serv_id": "mx.google.com",  # what Gmail stamps on the Authentication-Results it adds
}
_MICROSOFT = {
    "authorize_url": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
    "token_url": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
    "device_code_url": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/devicecode",
    "revoke_url": "",  # Microsoft has no revocation endpoint for these tokens: removing deletes them here
    "userinfo_url": "https://graph.microsoft.com/oidc/userinfo",
    "imap_host": "outlook.office365.com", "imap_port": 993,
    "smtp_host": "smtp.office365.com", "smtp_port": 587, "smtp_security": "starttls",
    "caldav_url": "",
    "graph_url": "https://graph.microsoft.com/v1.0",
}


class AccountConfig(Section):
    """One `[accounts.NAME]` table. After validation every endpoint holds a value (the provider's
    default where the table names none)."""

    provider: Literal["google", "microsoft"]
    client_id: str
    client_secret_env: str = ""  # the variable holding the client secret; "" = a public client
    services: list[Service] = Field(default_factory=lambda: list(SERVICES))
    tenant: str = "common"  # microsoft only: "common", "organizations", "consumers" or a tenant id
    authorize_url: str = ""
    token_url: str = ""
    device_code_url: str = ""
    revoke_url: str = ""
    userinfo_url: str = ""
    imap_host: str = ""
    imap_port: int = 0
    smtp_host: str = ""
    smtp_port: int = 0
    smtp_security: Literal["", "ssl", "starttls"] = ""
    caldav_url: str = ""
    graph_url: str = ""
    # The receiving server's authserv-id, whose Authentication-Results alone a trigger's verified_sender
    # trusts (Google: mx.google.com). Microsoft 365 writes its header without one: none to trust there.
    auth_serv_id: str = ""

    @model_validator(mode="after")
    def _defaults(self) -> "AccountConfig":
        if not self.client_id.strip():
            raise ValueError("client_id is empty (the id of your own OAuth client: see docs/accounts.md)")
        if not self.services:
            raise ValueError('services is empty (use "email", "calendar" or both)')
        if len(set(self.services)) != len(self.services):
            raise ValueError("services lists a service twice")
        if self.provider == "google" and "tenant" in self.model_fields_set:
            raise ValueError("tenant is for microsoft accounts only")
        if not re.fullmatch(r"[A-Za-z0-9.-]+", self.tenant):
            raise ValueError(f"tenant {self.tenant!r} is not a tenant name or id")
        defaults = _GOOGLE if self.provider == "google" else _MICROSOFT
        for key, value in defaults.items():
            if not getattr(self, key):
                setattr(self, key, value.format(tenant=self.tenant) if isinstance(value, str) else value)
        return self

    @property
    def resources(self) -> list[Resource]:
        """The token resources the services need: mail for email, calendar for calendar."""
        return [("mail" if s == "email" else "calendar") for s in self.services]

    def client_secret(self) -> str | None:
        """The client secret from its environment variable; None for a public client or when unset."""
        if not self.client_secret_env:
            return None
        return os.environ.get(self.client_secret_env, "").strip() or None


def check_account_names(accounts: dict[str, AccountConfig], email_name: str | None,
                        calendar_name: str | None) -> None:
    """Each account name matches NAME_PATTERN, and no name serves one service twice across [email],
    [calendar] and [accounts.*]; raises ValueError naming the problem."""
    for name in accounts:
        if not NAME_PATTERN.match(name):
            raise ValueError(f"account name {name!r} is not valid ({NAME_RULE})")
    for service, password_name in (("email", email_name), ("calendar", calendar_name)):
        if password_name is not None and not NAME_PATTERN.match(password_name):
            raise ValueError(f"[{service}] name {password_name!r} is not valid ({NAME_RULE})")
        other = accounts.get(password_name or "")
        if other is not None and service in other.services:
            raise ValueError(f"the name {password_name!r} is used by both [{service}] and [accounts.{password_name}]"
                             f" for {service}: give [{service}] another `name`")
