"""The event sources of a resident's triggers, started after the automation service and stopped before
it: the mail watcher (when a mailbox is configured) and the calendar planner (when a calendar is)."""

from __future__ import annotations

import logging
from typing import Any

from gateway.automations.event_plan import EventPlanner
from gateway.automations.mail_watch import MailWatcher
from gateway.automations.scheduler import AutomationService
from store.db import Store

log = logging.getLogger(__name__)


class TriggerSources:
    """Starts and stops every event source the configured services allow."""

    def __init__(self, store: Store, services: dict[str, Any], enqueue: Any) -> None:
        automations: AutomationService = services["automations"]
        self.mail = MailWatcher(store, automations.list_all, automations.fire_event, enqueue,
                                services["email"]) if "email" in services else None
        self.calendar = EventPlanner(store, automations.list_all, automations.fire_event, services["calendar"],
                                     automations.tz) if "calendar" in services else None

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
