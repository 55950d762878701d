"""Authorization: who is an owner, who is a guest, what a guest's turn may use, and who may decide.

Owners are the users a surface's config lists (`allowed_users`, `approvers`, `[approvals] approvers`)
and whoever holds the terminal (`anyy chat`, the admin CLI). Guests are users admitted by pairing
(`anyy pairing approve SURFACE CODE`): they have their own sessions, memory, tasks and reminders, and only
the toolsets `[access] guest_toolsets` lists (or that declare `guests=True`), never the connector
toolsets that act through the owner's accounts or machine, and never one that declares `owners_only`
(the browser) whatever the list says. Anyone else gets a pairing code and nothing else. Every entry point
asks this module: a message (runtime), a button press (app.press), an automation run (scheduler), a
decision (approvals.decide), a surface about to download attachments.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from gateway.config import Config
from gateway.surfaces.console import CHAT_ID as CONSOLE_CHAT
from store.access import AccessRepo
from store.db import Store
from store.records import ApprovalRecord, Button, Inbound, Origin, Outbound, PairingRecord, iso, utcnow
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
OWNER_SURFACES = ("telegram", "slack")  # surfaces whose config lists owners with a direct chat
# Owners hear of at most this many new strangers per surface an hour: a crowd of throwaway accounts
# must not flood the owner's chat (the rest still get codes, and `anyy pairing list` shows them).
MAX_NOTICES_PER_HOUR = 5
GROUP_REPLY = ("I only answer people the owner has admitted. To ask for access, write to me in a direct "
               "message: you will get a pairing code there.")


Delivery = tuple[Outbound, str]  # a message and its outbox dedupe key


def owner_chats(config: Config) -> list[Origin]:
    """Where to tell the owners something nobody asked about (a budget warning, an account signed out):
    each owner's direct chat on Telegram and Slack; with no owner there, the console's chat (shown when
    `anyy chat` next runs), so an owner who only uses the terminal is told too."""
    chats = [Origin(surface=surface, chat_id=str(owner)) for surface in OWNER_SURFACES
             for owner in getattr(getattr(config, surface, None), "allowed_users", [])]
    return chats or [Origin(surface="console", chat_id=CONSOLE_CHAT)]


@dataclass
class PairingAnswer:
    """What a stranger's message causes: the reply to them (None once told often enough) and the
    notices to the surface's owners (only for a new code, and rate-limited)."""

    reply: str | None
    notices: list[Delivery] = field(default_factory=list)


class Outbox(Protocol):
    async def enqueue(self, outbound: Outbound, dedupe_key: str | None = None) -> int: ...
    async def put(self, outbound: Outbound, dedupe_key: str) -> int: ...


@dataclass
class PairingDecision:
    """An Admit / Ignore: the answer for the owner who decided, the welcome for an admitted user, and
    the owners' notices rewritten to the outcome (their buttons gone)."""

    answer: str
    welcome: Delivery | None = None
    edits: list[Delivery] = field(default_factory=list)

    async def deliver(self, outbox: Outbox) -> None:
        if self.welcome is not None:
            await outbox.enqueue(*self.welcome)
        for edit in self.edits:
            await outbox.put(*edit)


class Access:
    def __init__(self, store: Store, config: Config, toolsets: Sequence[Toolset] = ()) -> None:
        self.repo = AccessRepo(store)
        self.config = config
        self._toolsets = {ts.name: ts for ts in toolsets}
        self._notices: dict[str, deque[float]] = {}  # surface -> monotonic times of recent notices
        self._told_in_group: dict[str, float] = {}  # "surface:user" -> monotonic time of the last GROUP_REPLY
        self._configured: dict[str, frozenset[str]] = {}  # surface -> `configured`: the config is read once

    # -- roles ------------------------------------------------------------------------------------

    def configured(self, surface: str) -> frozenset[str]:
        """User ids the config lists for `surface`: the owners there. Built once per surface (every
        message asks, and an allowlist may be long)."""
        owners = self._configured.get(surface)
        if owners is None:
            section = getattr(self.config, surface, None)
            listed = {str(u) for u in getattr(section, "allowed_users", [])}
            listed |= {str(u) for u in getattr(section, "approvers", [])}
            prefix = f"{surface}:"
            listed |= {k[len(prefix):] for k in self.config.approvals.approvers if k.startswith(prefix)}
            owners = frozenset(listed)
            self._configured[surface] = owners
        return owners

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
        if ts is not None and ts.owners_only:
            return False
        return toolset in self.config.access.guest_toolsets or (ts is not None and ts.guests)

    def toolsets_for(self, role: Role | None, toolsets: Sequence[Toolset]) -> list[Toolset]:
        """The toolsets a turn of this role may be offered (a stranger's turn never gets this far)."""
        if role == "owner":
            return list(toolsets)
        return [ts for ts in toolsets if not ts.owners_only and (ts.guests or self.guest_may_use(ts.name))]

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

    async def pairing_reply(self, inbound: Inbound) -> PairingAnswer:
        """The answer to an unknown user: their pairing code (new or current), or no reply once they
        have been told often enough (so a stranger cannot make the bot talk endlessly); for a new
        code, a notice with Admit / Ignore buttons to each owner of the surface."""
        if inbound.is_group:  # a code is given in private only: the group would read it. Told once an hour.
            key, now_s = f"{inbound.surface}:{inbound.user_id}", time.monotonic()
            if now_s - self._told_in_group.get(key, -3600.0) < 3600:
                return PairingAnswer(None)
            if len(self._told_in_group) >= 1000:  # a crowd of strangers must not grow it without end
                self._told_in_group = {k: t for k, t in self._told_in_group.items() if now_s - t < 3600}
            self._told_in_group[key] = now_s
            return PairingAnswer(GROUP_REPLY)
        current = await self.repo.current_code(inbound.surface, inbound.user_id)
        notices: list[Delivery] = []
        if current is None:
            now = utcnow()
            current = PairingRecord(
                code="".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LEN)), surface=inbound.surface,
                user_id=inbound.user_id, chat_id=inbound.chat_id, user_name=inbound.user_name,
                created_at=iso(now), expires_at=iso(now + CODE_TTL))
            await self.repo.add_code(current)
            notices = self._owner_notices(current)
        elif await self.repo.bump_attempts(current.code) >= MAX_REPLIES_PER_CODE:
            return PairingAnswer(None)
        return PairingAnswer(f"I don't know you yet. Your pairing code is {current.code} (valid for 1 hour). "
                             f"Ask the owner to run: anyy pairing approve {inbound.surface} {current.code}",
                             notices)

    def _owners(self, surface: str) -> list[str]:
        return [str(u) for u in getattr(getattr(self.config, surface, None), "allowed_users", [])]

    def _owner_notices(self, rec: PairingRecord) -> list[Delivery]:
        owners = self._owners(rec.surface)
        recent = self._notices.setdefault(rec.surface, deque())
        now = time.monotonic()
        while recent and now - recent[0] > 3600:
            recent.popleft()
        if not owners or len(recent) >= MAX_NOTICES_PER_HOUR:
            if owners:
                log.info("pairing_notice_suppressed surface=%s reason=rate_limit", rec.surface)
            return []
        recent.append(now)
        text = (f"{stranger_label(rec)} wants to talk to Anyy on {rec.surface}. Admit them as a guest (their own "
                f"sessions, no access to your accounts)? Code {rec.code}, valid for 1 hour.")
        buttons = [Button(label="Admit", action="admit", value=rec.code),
                   Button(label="Ignore", action="ignore", value=rec.code)]
        # An owner's direct chat has the owner's id on Telegram and Slack alike. Preformatted: the stranger
        # chose the name, so no surface may read it as Markdown, a link or a mention.
        return [(Outbound(origin=Origin(surface=rec.surface, chat_id=owner), text=text, buttons=buttons,
                          preformatted=True), _notice_key(rec, owner)) for owner in owners]

    async def decide_pairing(self, surface: str, owner_id: str, code: str, *, admit: bool) -> PairingDecision:
        """An owner's Admit / Ignore press. Only an owner of the same surface may decide (a guest cannot
        bring in friends)."""
        if await self.role(surface, owner_id) != "owner":
            log.info("pairing_press_refused surface=%s reason=not_owner", surface)
            return PairingDecision("Only the owner can admit someone; nothing changed.")
        return await self.settle_pairing(surface, code, admit=admit, by=f"{surface}:{owner_id}")

    async def settle_pairing(self, surface: str, code: str, *, admit: bool, by: str) -> PairingDecision:
        """Admit the stranger behind `code` (as `anyy pairing approve`) or leave them unpaired, for an
        owner `by` the caller has checked."""
        rec = next((p for p in await self.repo.pending() if p.surface == surface and p.code == code.upper()), None)
        if rec is None or (admit and await self.repo.redeem(surface, code) is None):
            return PairingDecision("That pairing code has expired or was already used; nothing changed.")
        label = stranger_label(rec)
        log.info("pairing_%s surface=%s user=%s by=%s", "admitted" if admit else "ignored", surface, rec.user_id, by)
        outcome = f"admitted as a guest by {by}" if admit else f"ignored by {by}: they stay unpaired"
        edits = [(Outbound(origin=Origin(surface=surface, chat_id=owner), preformatted=True,
                           text=f"{label} asked to talk to Anyy on {surface}: {outcome}."), _notice_key(rec, owner))
                 for owner in self._owners(surface)]
        if not admit:
            return PairingDecision("Ignored: they stay unpaired (their code expires within the hour).", edits=edits)
        welcome = Outbound(origin=Origin(surface=surface, chat_id=rec.chat_id),
                           text="You're in: the owner admitted you. Write me anything.")
        return PairingDecision(f"Admitted {label}.", (welcome, f"pairing-welcome:{surface}:{rec.code}"), edits)

    # -- revocation -------------------------------------------------------------------------------

    async def revoke(self, surface: str, user_id: str, approvals: ApprovalService,
                     automations: AutomationService) -> tuple[int, int] | None:
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


def stranger_label(rec: PairingRecord) -> str:
    """"Name (user 123)": the name a stranger gave themselves, reduced to plain characters so it cannot
    carry a link or formatting into the owner's chat."""
    name = re.sub(r"[^\w .@'-]", "", rec.user_name or "")[:64].strip()
    return f"{name} (user {rec.user_id})" if name else f"user {rec.user_id}"


def _notice_key(rec: PairingRecord, owner: str) -> str:
    """One outbox row per stranger's code and owner: the notice, and later its rewrite to the outcome."""
    return f"pairing-notice:{rec.surface}:{rec.code}:{owner}"
