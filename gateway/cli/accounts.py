"""`anyy accounts add|list|remove|test`: signing in to the configured OAuth accounts and looking after them.

`add` runs the provider's sign-in and saves the tokens only once it has succeeded: a refused, failed or
interrupted (Ctrl-C) sign-in leaves the store as it was. The sign-in reads nothing but what the owner
pastes on stdin. Tokens are never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.accounts import AccountTokens
    from gateway.config import Config
    from gateway.config.accounts import AccountConfig

DOCS = "docs/accounts.md"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("accounts", parents=[common], help="Google and Microsoft accounts: sign in, list, remove, test")
    a = p.add_subparsers(dest="action", required=True)
    x = a.add_parser("add", parents=[common], help="sign in to the account [accounts.NAME] of the config")
    x.add_argument("name")
    x.add_argument("--paste", action="store_true",
                   help="Microsoft: sign in with a browser link and a pasted address instead of a device code "
                        "(for organisations that block device code sign-in); Google always works this way")
    x.set_defaults(fn=accounts_add)
    x = a.add_parser("list", parents=[common], help="every account: provider, address, services, state")
    x.add_argument("--json", action="store_true", help="one JSON array")
    x.set_defaults(fn=accounts_list)
    x = a.add_parser("remove", parents=[common], help="revoke the account's access where the provider can and "
                                                      "delete its tokens")
    x.add_argument("name")
    x.set_defaults(fn=accounts_remove)
    x = a.add_parser("test", parents=[common], help="sign in to each of the account's services and say what works")
    x.add_argument("name")
    x.set_defaults(fn=accounts_test)


def say(text: str) -> None:
    print(text, flush=True)  # flushed: the owner (or a test) acts on each line while the command waits


def configured(config: Config, name: str) -> AccountConfig:
    from gateway.cli.admin import AdminError

    cfg = config.accounts.get(name)
    if cfg is None:
        known = ", ".join(sorted(config.accounts)) or "none"
        raise AdminError(f"no account {name!r} in the config (configured: {known}); add an [accounts.{name}] "
                         f"table first ({DOCS})")
    return cfg


async def accounts_add(config: Config, args: argparse.Namespace) -> int:
    from gateway.accounts import account_tokens
    from gateway.accounts.grant import GrantRefused, OAuthError
    from gateway.accounts.loopback import read_pasted_line
    from gateway.accounts.providers import sign_in
    from gateway.accounts.state import missing_scopes
    from gateway.accounts.vault import VaultError

    cfg = configured(config, args.name)
    if cfg.client_secret_env and cfg.client_secret() is None:
        from gateway.cli.admin import AdminError
        raise AdminError(f"{cfg.client_secret_env} is not set: put {cfg.client_secret_env}=<your OAuth client's "
                         f"secret> in secrets.env beside the config, where the service reads it too ({DOCS}); "
                         "nothing was done")
    if args.paste and cfg.provider == "google":
        say("(Google always signs in with a browser link; --paste changes nothing for it.)")
    reads_paste = cfg.provider == "google" or args.paste
    try:
        signed_in = await sign_in(cfg, say, paste=args.paste, pasted=read_pasted_line if reads_paste else None)
    except (GrantRefused, OAuthError) as exc:
        print(f"anyy: sign-in of {args.name!r} failed: {exc}. Nothing was saved.", file=sys.stderr)
        return 1
    try:
        async with config.new_store() as store:
            await account_tokens(config, store).save_sign_in(args.name, signed_in)
    except VaultError as exc:  # no key to seal the tokens with (ANYY_SECRET_KEY malformed, key file unwritable)
        print(f"anyy: signed in, but the tokens cannot be saved: {exc}. Nothing was saved.", file=sys.stderr)
        return 1
    missing = missing_scopes(cfg, signed_in.scopes)
    say(f"Signed in to {args.name!r} as {signed_in.address} ({', '.join(cfg.services)}).")
    if missing:
        say(f"Not granted: {', '.join(missing)}. The services needing it will not work; run "
            f"`anyy accounts add {args.name}` again and allow everything asked.")
        return 1
    say(f"Check it with `anyy accounts test {args.name}`.")
    return 0


async def accounts_list(config: Config, args: argparse.Namespace) -> int:
    from gateway.accounts import account_tokens

    async with config.new_store() as store:
        states = await account_tokens(config, store).states()
    if args.json:
        print(json.dumps([s.model_dump(mode="json") for s in states], indent=2))
        return 0
    if not states:
        print(f"No accounts configured ([accounts.NAME] in the config; see {DOCS}).")
        return 0
    rows = [(s.name, s.provider, s.address or "-", ",".join(s.services), s.state) for s in states]
    head = ("NAME", "PROVIDER", "ADDRESS", "SERVICES", "STATE")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for s in states:
        if s.fix:
            print(f"{s.name}: {s.fix}" + (f" (not granted: {', '.join(s.missing)})" if s.missing else ""))
    return 0


async def accounts_remove(config: Config, args: argparse.Namespace) -> int:
    from gateway.accounts import account_tokens
    from gateway.accounts.grant import OAuthError
    from gateway.accounts.providers import oauth_provider

    async with config.new_store() as store:
        refresh_token = await account_tokens(config, store).forget(args.name)
    if refresh_token is None:
        print(f"No tokens were saved for {args.name!r}; nothing to remove.")
        return 0
    cfg = config.accounts.get(args.name)
    print(f"Deleted the tokens of {args.name!r}.")
    where = ("https://myaccount.google.com/permissions" if cfg is not None and cfg.provider == "google"
             else "https://myapps.microsoft.com or https://account.live.com/consent/Manage")
    if cfg is None:
        print(f"It is no longer in the config, so its access could not be revoked: remove it at {where}.")
        return 0
    try:
        revoked = await oauth_provider(cfg).revoke(refresh_token)
    except OAuthError as exc:
        print(f"Revoking at the provider failed ({exc}): remove the app's access at {where}.", file=sys.stderr)
        return 1
    if revoked:
        print("Revoked its access at the provider.")
    else:
        print(f"The provider has no way for Anyy to revoke it; to end its access everywhere, remove the app "
              f"at {where}.")
    return 0


async def accounts_test(config: Config, args: argparse.Namespace) -> int:
    from gateway.accounts import account_tokens

    cfg = configured(config, args.name)
    async with config.new_store() as store:
        results = await check_services(args.name, cfg, account_tokens(config, store))
    for what, problem in results:
        print(f"{what}: {'works' if problem is None else 'FAILED: ' + problem}")
    return 0 if all(problem is None for _, problem in results) else 1


async def check_services(name: str, cfg: AccountConfig, tokens: AccountTokens) -> list[tuple[str, str | None]]:
    """Sign in to each service of the account as the tools would (same clients, same tokens): IMAP and
    SMTP for email, the calendar list for calendar. Each result: what was tried, None or what failed."""
    from connectors.caldav import CalendarError
    from connectors.oauth_token import SignInNeeded, TokenUnavailable
    from gateway.services.accounts import oauth_calendar, oauth_email

    results: list[tuple[str, str | None]] = []
    imap, smtp = f"email: IMAP {cfg.imap_host}:{cfg.imap_port}", f"email: SMTP {cfg.smtp_host}:{cfg.smtp_port}"
    if "email" in cfg.services:
        try:
            async with await oauth_email(tokens, name, cfg)() as mailbox:
                status = await mailbox.status()
            results += [(imap, None if status.imap == "ok" else status.imap),
                        (smtp, None if status.smtp == "ok" else status.smtp)]
        except (SignInNeeded, TokenUnavailable) as exc:
            results += [(imap, str(exc)), (smtp, str(exc))]
    if "calendar" in cfg.services:
        server = f"Microsoft Graph {cfg.graph_url}" if cfg.provider == "microsoft" else f"CalDAV {cfg.caldav_url}"
        where = f"calendar: {server}"
        try:
            async with await oauth_calendar(tokens, name, cfg)() as calendars:
                found = await calendars.calendars()
            results.append((f"{where} ({len(found)} calendar{'s' if len(found) != 1 else ''})", None))
        except (SignInNeeded, TokenUnavailable, CalendarError) as exc:
            results.append((where, str(exc)))
    return results
