"""Telling the owners, once, that an account was signed out by its provider and which command reconnects it.

Sent through the outbox to each owner's direct chat on every configured surface (as pairing notices
are). Once per sign-in: each notice's dedupe key names the account's sign-in generation, and the row is
marked notified after the notices are queued, so neither a second resident nor a restart repeats them,
and a notice that this process could not queue (it was killed in between, or it is an admin command
without surfaces) is sent by the next resident to start.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.accounts.state import expiry_notice
from gateway.accounts.tokens import AccountTokens
from gateway.config import Config
from store.records import Origin, Outbound

log = logging.getLogger(__name__)

Enqueue = Callable[[Outbound, str], Awaitable[int]]
OWNER_SURFACES = ("telegram", "slack")  # surfaces whose config lists owners with a direct chat


class ExpiryNotices:
    def __init__(self, config: Config, accounts: AccountTokens, enqueue: Enqueue) -> None:
        self.config = config
        self.accounts = accounts
        self.enqueue = enqueue

    def owners(self) -> list[tuple[str, str]]:
        """(surface, user id) of every owner; an owner's direct chat has the owner's id."""
        return [(surface, str(user)) for surface in OWNER_SURFACES
                for user in getattr(getattr(self.config, surface, None), "allowed_users", [])]

    async def send(self) -> int:
        """Queue the notices of every expiry the owners have not been told of; returns how many."""
        queued = 0
        for name, address, generation in await self.accounts.unnotified():
            text = expiry_notice(name, address)
            for surface, owner in self.owners():
                await self.enqueue(Outbound(origin=Origin(surface=surface, chat_id=owner), text=text),
                                   f"account-expired:{name}:{generation}:{surface}:{owner}")
                queued += 1
            await self.accounts.notified(name, generation)
            log.info("account_expiry_notice account=%s owners=%d", name, len(self.owners()))
        return queued
