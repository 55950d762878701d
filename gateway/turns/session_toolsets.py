"""Which toolsets any turn of a session may have, whatever started the turn (a message, an approval's
follow-up, a helper it starts)."""

from __future__ import annotations

from store.db import Store
from store.records import SessionRecord
from store.subagents import SubagentJobs
from toolsets.base import Toolset

AUTOMATION_TOOLSET = "automation"  # never offered to an automation's own session


async def session_toolsets(store: Store, session: SessionRecord, toolsets: list[Toolset]) -> list[Toolset]:
    """`toolsets` cut to what the session may have: an automation's session never the automation toolset
    (nobody watches it: automations must not multiply themselves), a helper's session only the toolsets
    its job was given."""
    if session.kind == "automation":
        return [ts for ts in toolsets if ts.name != AUTOMATION_TOOLSET]
    if session.kind == "subagent":
        job = await SubagentJobs(store).by_child_session(session.id)
        given = set(job.toolsets) if job else set()
        return [ts for ts in toolsets if ts.name in given]
    return toolsets
