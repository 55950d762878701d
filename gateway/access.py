"""Authorization: configured allowlists, users admitted by pairing, and who may decide approvals.

An unknown user gets a pairing code and nothing else; the owner admits them from the CLI with
`anyy pairing approve SURFACE CODE`.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from gateway.config import Config
from store.access import AccessRepo
from store.db import Store
from store.records import Inbound, PairingRecord, iso, utcnow

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read from a phone, typed on a laptop
CODE_LEN = 8
CODE_TTL = timedelta(hours=1)
MAX_REPLIES_PER_CODE = 3  # after this, an unknown user's messages are ignored until the code expires


class Access:
    def __init__(self, store: Store, config: Config) -> None:
        self.repo = AccessRepo(store)
        self.config = config

    def configured(self, surface: str) -> set[str]:
        section = getattr(self.config, surface, None)
        return {str(u) for u in getattr(section, "allowed_users", [])}

    async def is_allowed(self, surface: str, user_id: str) -> bool:
        if surface == "console":
            return True  # whoever holds the terminal holds the data directory
        return user_id in self.configured(surface) or await self.repo.is_admitted(surface, user_id)

    def deciders(self, surface: str) -> list[str]:
        """User keys that may decide approvals besides the requester."""
        section = getattr(self.config, surface, None)
        keys = {f"{surface}:{u}" for u in getattr(section, "approvers", [])}
        return sorted(keys | set(self.config.approvals.approvers))

    async def pairing_reply(self, inbound: Inbound) -> str | None:
        """The reply for an unknown user: their pairing code (new or current), or None once they have
        been told often enough (so a stranger cannot make the bot talk endlessly)."""
        current = await self.repo.current_code(inbound.surface, inbound.user_id)
        if current is None:
            now = utcnow()
            current = PairingRecord(
                code="".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LEN)), surface=inbound.surface,
                user_id=inbound.user_id, chat_id=inbound.chat_id, user_name=inbound.user_name,
                created_at=iso(now), expires_at=iso(now + CODE_TTL))
            await self.repo.add_code(current)
        elif await self.repo.bump_attempts(current.code) >= MAX_REPLIES_PER_CODE:
            return None
        return (f"I don't know you yet. Your pairing code is {current.code} (valid for 1 hour). "
                f"Ask the owner to run: anyy pairing approve {inbound.surface} {current.code}")
