"""Which account a mail or calendar tool works on: one client per configured account, picked by name.

The gateway registers the "email" and "calendar" services as `AccountClients`: the password accounts of
`[email]` / `[calendar]` (named by their `name`, "default" unless set) and each OAuth account of
`[accounts.NAME]` serving that service, in config order. A tool's optional `account` argument names one;
without it the first is used. A single bare client (a test's, or an embedder's) is one account named
"default".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from toolsets.base import ToolContext, ToolError, configured


class Closable(Protocol):
    async def aclose(self) -> None: ...


T = TypeVar("T", bound=Closable)
Opener = Callable[[], Awaitable[T]]


class AccountClients(Generic[T]):
    """The clients of one service by account name, in config order (the first is the default), with
    what to call each account in a preview (and, for mail, the receiving server's authserv-id).

    Each account is given as an opener that makes its client on first use: `ready(client)` for one built
    already, or a function that waits for what it needs (an OAuth account's address, learned at sign-in,
    which may come after the resident started). An opener may raise `SignInNeeded`; it is then asked
    again on the next use.
    """

    def __init__(self, accounts: Mapping[str, Opener[T]], labels: Mapping[str, str] | None = None,
                 auth_serv_ids: Mapping[str, str] | None = None) -> None:
        if not accounts:
            raise ValueError("AccountClients needs at least one account")
        self._names = list(accounts)
        self._openers = dict(accounts)
        self._clients: dict[str, T] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._labels = dict(labels or {})
        self._auth_serv_ids = dict(auth_serv_ids or {})

    def __len__(self) -> int:
        return len(self._names)

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def default(self) -> str:
        return self._names[0]

    def label(self, name: str) -> str:
        """How a preview names the account: `work (microsoft)`, or just its name."""
        return self._labels.get(name, name)

    def auth_serv_id(self, name: str) -> str:
        """The authserv-id of the mail account's receiving server, whose Authentication-Results headers
        alone say whether a sender was verified ("": none configured, so no sender can be)."""
        return self._auth_serv_ids.get(name, "").strip()

    def known(self, name: str | None) -> str:
        """The account `name` means (the first without one); a ToolError listing the accounts otherwise."""
        wanted = (name or "").strip() or self.default
        if wanted not in self._names:
            raise ToolError(f"there is no account {wanted!r}; the accounts are: {', '.join(self._names)}")
        return wanted

    async def pick(self, name: str | None) -> tuple[str, T]:
        """(name, client) of the account called `name`, or of the first one."""
        wanted = self.known(name)
        if wanted not in self._clients:
            async with self._opening.setdefault(wanted, asyncio.Lock()):  # two tools at once open one client
                if wanted not in self._clients:
                    self._clients[wanted] = await self._openers[wanted]()
        return wanted, self._clients[wanted]

    async def aclose(self) -> None:
        """Close every client opened so far."""
        for client in self._clients.values():
            await client.aclose()


def ready(client: T) -> Opener[T]:
    """An opener of a client that exists already."""

    async def opener() -> T:
        return client

    return opener


def accounts_of(ctx: ToolContext, service: str, what: str) -> AccountClients[Any]:
    """The accounts of `service` from the tool's context; a ToolError "`what` is not configured" without
    it."""
    found = configured(ctx, service, what)
    return found if isinstance(found, AccountClients) else AccountClients({"default": ready(found)})
