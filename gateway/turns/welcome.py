"""The first conversation teaches: an owner's first message on a surface gets a short welcome before its
answer — what Anyy can do with what is configured (the toolsets present, the accounts connected), three
example requests, how approvals look, and /help.

On when `[runtime] welcome` is (`anyy setup` writes it). Once per owner per surface, across restarts:
"first" means the owner has no session on the store yet (the turn that follows creates one), and the
welcome is an outbox row under a dedupe key naming the owner, so a turn re-run after a crash does not send
it twice. Guests (admitted by pairing) are not welcomed: what it lists is the owner's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gateway.access import Access
from gateway.config import Config
from gateway.outbox import OutboxService
from store.db import Store
from store.records import Inbound, Outbound
from toolsets.base import Toolset

# What a toolset lets the owner do, in words; toolsets not named here are plumbing (the loader, clarify).
CAN = {
    "tasks": "keep your tasks", "automation": "remind you and run things on a schedule",
    "memory": "remember what you tell me to", "sessions": "search our past conversations",
    "email": "read, sort and draft your mail", "calendar": "read and change your calendar",
    "web": "read web pages (and search, where a search backend is set)", "file": "work with files",
    "terminal": "run commands on this machine", "browser": "use a browser for you",
    "computer_use": "operate this computer's screen", "tts": "answer with voice notes",
    "media_generation": "make images", "artifact": "make documents to download",
    "subagents": "hand longer jobs to helpers",
}
EXAMPLES = [
    ("calendar", "What's on my calendar tomorrow?"),
    ("email", "Any mail from my bank this week? Summarise it."),
    ("automation", "Remind me at 9 tomorrow to call the dentist."),
    ("tasks", "Add 'renew passport' to my tasks."),
    ("web", "What does https://example.com say? Two lines."),
    ("memory", "Remember that I take my coffee black."),
]


def welcome_text(toolsets: Sequence[str], accounts: Sequence[str], buttons: bool) -> str:
    """The welcome for an owner with these toolsets present and these accounts connected ("name (address)")."""
    can = [CAN[name] for name in CAN if name in toolsets]
    examples = [text for name, text in EXAMPLES if name in toolsets][:3]
    lines = ["Welcome! I'm Anyy, your assistant. Just write to me as you would to a person.",
             "With what is set up I can: " + "; ".join(can) + "."]
    lines.append(f"Accounts connected: {', '.join(accounts)}." if accounts else
                 "No mail or calendar account is connected yet (`anyy setup accounts` on the computer adds one).")
    lines += ["Try:", *(f"• {text}" for text in examples)]
    how = "with Approve and Deny buttons" if buttons else "with its id (answer /approve ID or /deny ID)"
    lines.append("Anything with a real-world effect — sending an email, changing your calendar, running a command "
                 f"— waits for you: I show exactly what I would do {how}, and nothing happens until you approve.")
    lines.append("/help lists the commands.")
    return "\n".join(lines)


class Welcome:
    def __init__(self, store: Store, config: Config, access: Access, outbox: OutboxService,
                 services: dict[str, Any]) -> None:
        self.enabled = config.runtime.welcome
        self.config = config
        self.store = store
        self.access = access
        self.outbox = outbox
        self.services = services
        self._known: set[str] = set()  # user keys that need no welcome (this process checked)

    async def __call__(self, inbound: Inbound, available: Callable[[], Sequence[Toolset]]) -> None:
        """Queue the welcome when this is an owner's first message on its surface."""
        key = inbound.user_key
        if not self.enabled or key in self._known:
            return
        self._known.add(key)
        if await self.access.role(inbound.surface, inbound.user_id) != "owner" or await self.store.run(
                lambda db: db.execute("SELECT 1 FROM sessions WHERE user_key = ? LIMIT 1", [key]).fetchone()):
            return
        text = welcome_text([ts.name for ts in available()], await self._accounts(),
                            buttons=inbound.surface in ("telegram", "slack"))
        await self.outbox.enqueue(Outbound(origin=inbound.origin, text=text), f"welcome:{key}")

    async def _accounts(self) -> list[str]:
        """The password accounts of [email] / [calendar] (connected as far as the config can say), then the
        OAuth accounts whose sign-in is connected; one entry per name and address."""
        found: list[tuple[str, str | None]] = []
        if (email := self.config.email) is not None:
            found.append((email.name, email.from_address))
        if (calendar := self.config.calendar) is not None:
            found.append((calendar.name, calendar.username or None))
        if (accounts := self.services.get("accounts")) is not None:
            found += [(s.name, s.address) for s in await accounts.states() if s.state == "connected"]
        return list(dict.fromkeys(f"{name} ({address})" if address else name for name, address in found))
