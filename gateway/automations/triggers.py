"""The event sources of a resident's triggers, started after the automation service and stopped before
it: the mail watcher (when a mailbox is configured) and the calendar planner (when a calendar is)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from gateway.automations.scheduler import AutomationService
from store.db import Store

if TYPE_CHECKING:  # each source is imported when its service is configured (IMAP, iCalendar libraries)
    from gateway.automations.event_plan import EventPlanner
    from gateway.automations.mail_watch import MailWatcher

log = logging.getLogger(__name__)


class Access(Protocol):
    """What the sources ask of the gateway's `Access` (which may not be imported here: it imports us)."""

    async def role_of(self, user_key: str) -> str | None: ...
    def guest_may_use(self, toolset: str) -> bool: ...


class TriggerSources:
    """Starts and stops every event source the configured services allow.

    A trigger reads the owner's mailbox or calendar, so it is only watched for a user whose turns may
    use that toolset (an owner; a guest only where `[access] guest_toolsets` lists it): a guest's email
    trigger must not show them the owner's mail."""

    def __init__(self, store: Store, services: dict[str, Any], enqueue: Any, access: Access) -> None:
        automations: AutomationService = services["automations"]

        def may_use(toolset: str) -> Callable[[str], Awaitable[bool]]:
            async def check(user_key: str) -> bool:
                role = await access.role_of(user_key)
                return role == "owner" or (role == "guest" and access.guest_may_use(toolset))

            return check

        self.mail: MailWatcher | None = None
        self.calendar: EventPlanner | None = None
        if "email" in services:
            from gateway.automations.mail_watch import MailWatcher
            self.mail = MailWatcher(store, automations.list_all, automations.fire_event, enqueue, services["email"],
                                    may_watch=may_use("email"))
        if "calendar" in services:
            from gateway.automations.event_plan import EventPlanner
            self.calendar = EventPlanner(store, automations.list_all, automations.fire_event, services["calendar"],
                                         automations.tz, may_watch=may_use("calendar"))

    async def start(self) -> None:
        if self.mail is not None:
            await self.mail.start()
        if self.calendar is not None:
            await self.calendar.start()
        log.info("triggers started mail=%s calendar=%s", self.mail is not None, self.calendar is not None)

    async def stop(self) -> None:
        if self.mail is not None:
            await self.mail.stop()
        if self.calendar is not None:
            await self.calendar.stop()
