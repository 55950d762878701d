"""Telling the owners, once, that an account was signed out by its provider and which command reconnects it.

Sent through the outbox to the owners' chats (`gateway.access.owner_chats`: each owner's direct chat on
Telegram and Slack, else the console's, as budget warnings are). Once per sign-in: each notice's dedupe
key names the account's sign-in generation, and the row is marked notified after the notices are queued,
so neither a second resident nor a restart repeats them, and a notice that this process could not queue
(it was killed in between, or it is an admin command without surfaces) is sent by the next resident to
start."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.access import owner_chats
from gateway.accounts.state import expiry_notice
from gateway.accounts.tokens import AccountTokens
from gateway.config import Config
from store.records import Outbound

log = logging.getLogger(__name__)

Enqueue = Callable[[Outbound, str], Awaitable[int]]


class ExpiryNotices:
    def __init__(self, config: Config, accounts: AccountTokens, enqueue: Enqueue) -> None:
        self.config = config
        self.accounts = accounts
        self.enqueue = enqueue

    async def send(self) -> int:
        """Queue the notices of every expiry the owners have not been told of; returns how many."""
        queued = 0
        for name, address, generation in await self.accounts.unnotified():
            text = expiry_notice(name, address)
            chats = owner_chats(self.config)
            for chat in chats:
                await self.enqueue(Outbound(origin=chat, text=text),
                                   f"account-expired:{name}:{generation}:{chat.surface}:{chat.chat_id}")
                queued += 1
            await self.accounts.notified(name, generation)
            log.info("account_expiry_notice account=%s chats=%d", name, len(chats))
        return queued
