"""The mail and calendar accounts tools reach: "email" and "calendar", each one `AccountClients`.

The password account of `[email]` / `[calendar]` (named by its `name`) comes first, then every
`[accounts.NAME]` serving that service, in config order. An OAuth account's client is made on first use,
with its address from the store (learned at sign-in, possibly after the resident started) and a token
provider from "accounts" (`AccountTokens`, built once per process); until the account is signed in, a
tool on it answers `SignInNeeded`'s one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from gateway.config import AccountConfig, CalendarConfig, Config, EmailConfig, secret
from store.db import Store

if TYPE_CHECKING:  # each client is imported where it is built: a process imports only what its config uses
    from connectors.calendar import CalendarClient
    from connectors.email import EmailClient
    from connectors.graph_calendar import GraphCalendar
    from gateway.accounts import AccountTokens


def email_client(cfg: EmailConfig) -> EmailClient:
    from connectors.email import EmailClient, EmailSettings
    settings = cfg.model_dump(exclude={"name", "password_env", "smtp_password_env", "auth_serv_id"})
    smtp_password = SecretStr(secret(cfg.smtp_password_env) or "") if cfg.smtp_password_env else None
    return EmailClient(EmailSettings(**settings, password=SecretStr(secret(cfg.password_env) or ""),
                                     smtp_password=smtp_password))


def calendar_client(cfg: CalendarConfig) -> CalendarClient:
    from connectors.calendar import CalendarClient, CalendarSettings
    return CalendarClient(CalendarSettings(url=cfg.url, username=cfg.username,
                                           password=SecretStr(secret(cfg.password_env) or ""),
                                           default_calendar=cfg.default_calendar, timeout=cfg.timeout_s))


async def _address(tokens: AccountTokens, name: str) -> str:
    from connectors.oauth_token import SignInNeeded
    address = await tokens.address(name)
    if not address:
        raise SignInNeeded(name, "not signed in yet")
    return address


def oauth_email(tokens: AccountTokens, name: str, cfg: AccountConfig) -> Callable[[], Awaitable[EmailClient]]:
    """Opens the mailbox of OAuth account `name` (XOAUTH2 on both servers). Gmail and Microsoft 365 file
    what their SMTP sends in the sent folder themselves, so no copy is appended (it would be a second)."""

    async def open_mailbox() -> EmailClient:
        from connectors.email import EmailClient, EmailSettings
        address = await _address(tokens, name)
        settings = EmailSettings(imap_host=cfg.imap_host, imap_port=cfg.imap_port, smtp_host=cfg.smtp_host,
                                 smtp_port=cfg.smtp_port, smtp_security=cfg.smtp_security or "ssl",
                                 username=address, from_address=address, sent_folder="", smtp_username=None,
                                 smtp_password=None, timeout_s=30)
        return EmailClient(settings, token=tokens.provider(name, "mail"))

    return open_mailbox


def oauth_calendar(tokens: AccountTokens, name: str,
                   cfg: AccountConfig) -> Callable[[], Awaitable[CalendarClient | GraphCalendar]]:
    """Opens the calendars of OAuth account `name`: Google's CalDAV with its bearer token, or Microsoft
    Graph."""

    async def open_calendars() -> CalendarClient | GraphCalendar:
        address = await _address(tokens, name)
        token = tokens.provider(name, "calendar")
        if cfg.provider == "microsoft":
            from connectors.graph_calendar import GraphCalendar
            return GraphCalendar(cfg.graph_url, address, token)
        from connectors.calendar import CalendarClient, CalendarSettings
        # Google's CalDAV root reports the principal of the token's user (the signed-in address), whose
        # calendar home lists their calendars: the same discovery as any CalDAV server.
        settings = CalendarSettings(url=cfg.caldav_url, username=address, default_calendar="", timeout=30)
        return CalendarClient(settings, token=token)

    return open_calendars


def account_services(config: Config, store: Store) -> dict[str, Any]:
    """"email" and "calendar" (`AccountClients`, when any account serves them) and "accounts" (the
    `AccountTokens`, when `[accounts.*]` exist). Opens no connection and reads no token."""
    from toolsets.accounts import AccountClients, Opener, ready
    out: dict[str, Any] = {}
    mail: dict[str, Opener[Any]] = {}
    calendars: dict[str, Opener[Any]] = {}
    labels: dict[str, str] = {}
    auth_serv_ids: dict[str, str] = {}
    if config.email is not None:
        mail[config.email.name] = ready(email_client(config.email))
        auth_serv_ids[config.email.name] = config.email.auth_serv_id
    if config.calendar is not None:
        calendars[config.calendar.name] = ready(calendar_client(config.calendar))
    if config.accounts:
        from gateway.accounts import account_tokens
        tokens = out["accounts"] = account_tokens(config, store)
        for name, cfg in config.accounts.items():
            labels[name] = f"{name} ({cfg.provider})"
            if "email" in cfg.services:
                mail[name] = oauth_email(tokens, name, cfg)
                auth_serv_ids[name] = cfg.auth_serv_id
            if "calendar" in cfg.services:
                calendars[name] = oauth_calendar(tokens, name, cfg)
    if mail:
        out["email"] = AccountClients(mail, labels, auth_serv_ids)
    if calendars:
        out["calendar"] = AccountClients(calendars, labels)
    return out
