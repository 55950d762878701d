"""Authorization: who is an owner, who is a guest, what a guest's turn may use, and who may decide.

Owners are the users a surface's config lists (`allowed_users`, `approvers`, `[approvals] approvers`)
and whoever holds the terminal (`anyy chat`, the admin CLI). Guests are users admitted by pairing
(`anyy pairing approve SURFACE CODE`): they have their own sessions, memory, tasks and reminders, and only
the toolsets `[access] guest_toolsets` lists (or that declare `guests=True`), never the connector
toolsets that act through the owner's accounts or machine. Anyone else gets a pairing code and nothing
else. Every entry point asks this module: a message (runtime), a button press (app.press), an
automation run (scheduler), a decision (approvals.decide), a surface about to download attachments.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from gateway.config import Config
from store.access import AccessRepo
from store.db import Store
from store.records import ApprovalRecord, Inbound, PairingRecord, iso, utcnow
from toolsets.base import Toolset

if TYPE_CHECKING:
    from gateway.approvals.service import ApprovalService
    from gateway.automations.scheduler import AutomationService

log = logging.getLogger(__name__)

Role = Literal["owner", "guest"]

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read from a phone, typed on a laptop
CODE_LEN = 8
CODE_TTL = timedelta(hours=1)
MAX_REPLIES_PER_CODE = 3  # after this, an unknown user's messages are ignored until the code expires
TERMINAL_SURFACES = ("console", "cli")  # whoever holds the terminal holds the data directory


class Access:
    def __init__(self, store: Store, config: Config, toolsets: Sequence[Toolset] = ()) -> None:
        self.repo = AccessRepo(store)
        self.config = config
        self._toolsets = {ts.name: ts for ts in toolsets}

    # -- roles ------------------------------------------------------------------------------------

    def configured(self, surface: str) -> set[str]:
        """User ids the config lists for `surface`: the owners there."""
        section = getattr(self.config, surface, None)
        listed = {str(u) for u in getattr(section, "allowed_users", [])} | {str(u) for u in getattr(section, "approvers", [])}
        prefix = f"{surface}:"
        return listed | {k[len(prefix):] for k in self.config.approvals.approvers if k.startswith(prefix)}

    async def role(self, surface: str, user_id: str) -> Role | None:
        """"owner", "guest", or None for a stranger (or a revoked guest)."""
        if surface in TERMINAL_SURFACES or user_id in self.configured(surface):
            return "owner"
        return "guest" if await self.repo.is_admitted(surface, user_id) else None

    async def role_of(self, user_key: str) -> Role | None:
        """The role of a user key "surface:user_id"."""
        surface, _, user_id = user_key.partition(":")
        return await self.role(surface, user_id)

    async def is_allowed(self, surface: str, user_id: str) -> bool:
        """Whether the user may talk to the assistant at all (surfaces ask before downloading files)."""
        return await self.role(surface, user_id) is not None

    async def allowed_key(self, user_key: str) -> bool:
        """`is_allowed` for a user key (an automation's owner, checked before every run)."""
        return await self.role_of(user_key) is not None

    # -- what a role may use ----------------------------------------------------------------------

    def guest_may_use(self, toolset: str) -> bool:
        """Whether a guest's turn may use the named toolset."""
        ts = self._toolsets.get(toolset)
        return toolset in self.config.access.guest_toolsets or (ts is not None and ts.guests)

    def toolsets_for(self, role: Role | None, toolsets: Sequence[Toolset]) -> list[Toolset]:
        """The toolsets a turn of this role may be offered (a stranger's turn never gets this far)."""
        if role == "owner":
            return list(toolsets)
        return [ts for ts in toolsets if ts.guests or self.guest_may_use(ts.name)]

    # -- deciding ---------------------------------------------------------------------------------

    def approvers(self, surface: str) -> list[str]:
        """User keys configured to decide approvals besides the requesting owner."""
        section = getattr(self.config, surface, None)
        keys = {f"{surface}:{u}" for u in getattr(section, "approvers", [])}
        return sorted(keys | set(self.config.approvals.approvers))

    async def deciders(self, requester: str, surface: str, toolset: str) -> list[str]:
        """Who may decide an approval `requester` caused: the configured approvers, plus the requester
        when they are an owner, or a guest asking for something of their own (a guest toolset)."""
        role = await self.role_of(requester)
        own = role == "owner" or (role == "guest" and self.guest_may_use(toolset))
        return sorted({*self.approvers(surface), *([requester] if own else [])})

    async def may_decide(self, rec: ApprovalRecord, actor: str, toolset: str) -> bool:
        """Checked at decision time, so a revocation or a config change since the hold counts."""
        if actor not in rec.deciders:
            return False
        role = await self.role_of(actor)
        return role == "owner" or (role == "guest" and self.guest_may_use(toolset))

    # -- strangers --------------------------------------------------------------------------------

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

    # -- revocation -------------------------------------------------------------------------------

    async def revoke(self, surface: str, user_id: str, approvals: "ApprovalService",
                     automations: "AutomationService") -> tuple[int, int] | None:
        """Remove a paired user completely: their admission, their pending approvals (cancelled, prompts
        edited) and their automations (disabled). Returns (approvals cancelled, automations disabled),
        or None when the user was not admitted by pairing."""
        if not await self.repo.revoke(surface, user_id):
            return None
        user_key = f"{surface}:{user_id}"
        cancelled = await approvals.cancel_requested_by(user_key, "the requester's access was revoked")
        disabled = 0
        for rec in await automations.list(user_key):
            if rec.enabled:
                await automations.update(user_key, rec.id, enabled=False)
                disabled += 1
        log.info("access_revoked user=%s approvals_cancelled=%d automations_disabled=%d", user_key, cancelled, disabled)
        return cancelled, disabled
