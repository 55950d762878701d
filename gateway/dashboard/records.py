"""The dashboard's pages over what Anyy keeps for its users: memory (view, edit, delete), tasks, skills
and MCP servers. The owner sees every user's entries; an edit or a deletion is audited as theirs."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from gateway.dashboard.actions import ACTOR
from gateway.dashboard.auth import PREFIX
from gateway.dashboard.context import SESSION, gateway_of, render, see_other
from gateway.turns.commands import status_lines
from store.audit import Audit
from store.memory import Memory
from store.records import AuditEvent
from store.tasks import Tasks

log = logging.getLogger(__name__)


async def memory(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    return render(request, "memory.html", entries=await Memory(gw.store).list(None),
                  max_chars=gw.config.runtime.memory_max_chars)


async def memory_change(request: web.Request) -> web.Response:
    """Edit or delete one entry; the user's memory cap still holds for an edit."""
    gw = gateway_of(request)
    repo = Memory(gw.store)
    entry_id, op = int(request.match_info["entry_id"]), request.match_info["op"]
    entry = await repo.get(entry_id)
    if entry is None:
        request[SESSION].flash = f"There is no memory entry {entry_id}; nothing changed."
        return see_other(f"{PREFIX}/memory")
    if op == "delete":
        await repo.remove(entry_id)
        answer = f"Deleted entry {entry_id} of {entry.user_key}."
    else:
        content = str((await request.post()).get("content") or "").strip()
        limit = gw.config.runtime.memory_max_chars
        if not content or len(content) > limit:
            request[SESSION].flash = f"An entry needs 1 to {limit} characters; entry {entry_id} is unchanged."
            return see_other(f"{PREFIX}/memory")
        await repo.set_content(entry_id, content)
        answer = f"Saved entry {entry_id} of {entry.user_key}."
    await Audit(gw.store).add(AuditEvent(actor=ACTOR, action=f"memory.{op}", subject=str(entry_id),
                                         detail={"user": entry.user_key, "target": entry.target}))
    log.info("dashboard_memory id=%s op=%s", entry_id, op)
    request[SESSION].flash = answer
    return see_other(f"{PREFIX}/memory#memory-{entry_id}")


async def tasks(request: web.Request) -> web.Response:
    repo = Tasks(gateway_of(request).store)
    return render(request, "tasks.html", open_tasks=await repo.list(None, "open", limit=200),
                  done=await repo.list(None, "done", limit=50))


async def skills(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    library = gw.services["skills"]
    found = await asyncio.to_thread(library.skills)  # reads the skill folders: off the event loop
    return render(request, "skills.html", skills=sorted(found.values(), key=lambda s: s.name),
                  problems=library.problems, servers=[line for _, line in status_lines(gw.services.get("mcp"))],
                  configured=list(gw.config.mcp.servers))


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get(f"{PREFIX}/memory", memory, name="memory")
    router.add_post(f"{PREFIX}/memory/{{entry_id:\\d+}}/{{op:edit|delete}}", memory_change)
    router.add_get(f"{PREFIX}/tasks", tasks, name="tasks")
    router.add_get(f"{PREFIX}/skills", skills, name="skills")
