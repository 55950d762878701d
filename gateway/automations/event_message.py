"""The message of an automation firing for a recorded event (a trigger's run).

A reminder action fills its line from the event's fields and calls no model. A prompt action runs its
prompt with the event attached as outside content: the prompt runner wraps it in an untrusted block and
counts the turn as having read it, so anything the turn asks for with an effect waits for Approve.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from store.records import AutomationRecord
from store.triggers import TriggerEvent, TriggerEvents
from toolsets.schedule import AutomationError, Reminder, parse_action, parse_schedule, reminder_template
from toolsets.schedule_triggers import render_line


class RunPrompt(Protocol):
    """Runs a prompt automation's model turn for `slot` and returns the reply; `event` (a trigger's) is
    outside content the turn sees and is tainted by."""

    def __call__(self, rec: AutomationRecord, slot: str, event: TriggerEvent | None = None) -> Awaitable[str]: ...


async def event_message(events: TriggerEvents, run_prompt: RunPrompt | None, row: AutomationRecord, slot: str,
                        key: str) -> str:
    """The text an automation delivers for the event recorded under `key` (its run's `slot`)."""
    event = await events.get(key)
    if event is None:
        raise AutomationError(f"the event {key} that fired this automation is no longer recorded")
    action = parse_action(row.action)
    if isinstance(action, Reminder):
        return render_line(reminder_template(parse_schedule(row.schedule), action), event.fields)
    if run_prompt is None:
        raise AutomationError("no model is available to run this automation's prompt")
    return await run_prompt(row, slot, event)
