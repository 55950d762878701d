"""The core toolsets (tasks, memory, sessions, messaging, clarify) and the loader, called through their
argument models the way the runtime calls them, against the real store."""

import json
import re
from typing import Any

import pytest

from store.messages import Messages
from store.outbox import Outbox
from store.records import MessageRecord, Origin, Outbound
from store.sessions import Sessions
from tests.support.context import RecordingContext
from toolsets import clarify, memory, messaging, sessions, tasks
from toolsets.base import Tool, ToolError
from toolsets.loader import loader_tool
from toolsets.memory import MemoryLimits, memory_prompt


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


# -- tasks ------------------------------------------------------------------------------------------


async def test_task_lifecycle(store):
    ctx = RecordingContext(store)
    created = await call(tasks.task_create, ctx, title=" Renew passport ", due="2030-03-31")
    assert created == {"id": created["id"], "title": "Renew passport", "notes": "", "due": "2030-03-31",
                       "status": "open"}
    await call(tasks.task_create, ctx, title="Buy milk")
    assert [t["title"] for t in await call(tasks.task_list, ctx)] == ["Renew passport", "Buy milk"]

    updated = await call(tasks.task_update, ctx, task_id=created["id"], notes="photos first", clear_due=True)
    assert updated["notes"] == "photos first" and "due" not in updated
    done = await call(tasks.task_complete, ctx, task_id=created["id"])
    assert done["status"] == "done"
    assert [t["title"] for t in await call(tasks.task_list, ctx)] == ["Buy milk"]
    assert [t["title"] for t in await call(tasks.task_list, ctx, status="done")] == ["Renew passport"]
    reopened = await call(tasks.task_update, ctx, task_id=created["id"], status="open")
    assert reopened["status"] == "open"


async def test_task_bad_input_is_a_tool_error(store):
    ctx = RecordingContext(store)
    with pytest.raises(ToolError, match="title is empty"):
        await call(tasks.task_create, ctx, title="   ")
    with pytest.raises(ToolError, match="no task 99; task_list"):
        await call(tasks.task_complete, ctx, task_id=99)
    task = await call(tasks.task_create, ctx, title="t", due="2030-01-01")
    with pytest.raises(ToolError, match="nothing to change"):
        await call(tasks.task_update, ctx, task_id=task["id"])
    with pytest.raises(ToolError, match="either due or clear_due"):
        await call(tasks.task_update, ctx, task_id=task["id"], due="2030-02-02", clear_due=True)


async def test_tasks_are_per_user(store):
    mine = await call(tasks.task_create, RecordingContext(store, user_key="telegram:1"), title="secret")
    other = RecordingContext(store, user_key="telegram:2")
    assert await call(tasks.task_list, other, status="all") == []
    with pytest.raises(ToolError, match=f"no task {mine['id']}"):
        await call(tasks.task_update, other, task_id=mine["id"], title="mine now")
    with pytest.raises(ToolError):
        await call(tasks.task_complete, other, task_id=mine["id"])


async def test_task_writes_are_audited_and_reads_direct():
    for tool in (tasks.task_create, tasks.task_update, tasks.task_complete, memory.memory, messaging.notify_user,
                 messaging.send_message):
        assert (tool.descriptor.risk, tool.descriptor.execution) == ("runtime-low", "audit"), tool.name
    for tool in (tasks.task_list, sessions.session_search, messaging.messaging_status, messaging.message_receipt):
        assert (tool.descriptor.risk, tool.descriptor.execution) == ("read", "direct"), tool.name


# -- memory -----------------------------------------------------------------------------------------


async def test_memory_add_replace_remove_and_prompt(store):
    ctx = RecordingContext(store)
    assert "added to user memory" in await call(memory.memory, ctx, action="add", target="user",
                                                content="Vegetarian; lives in Berlin")
    await call(memory.memory, ctx, action="add", target="notes", content="Prefers short answers")
    assert await call(memory.memory, ctx, action="add", target="notes", content="Prefers short answers") == (
        "already in notes memory")
    await call(memory.memory, ctx, action="replace", target="user", old_text="Berlin", content="Hamburg")
    await call(memory.memory, ctx, action="remove", target="user", old_text="Vegetarian;")
    assert await memory_prompt(store, ctx.user_key, 4000) == (
        "About the user:\n- lives in Hamburg\n\nYour notes:\n- Prefers short answers")
    await call(memory.memory, ctx, action="remove", target="notes", old_text="Prefers short answers")
    assert await memory_prompt(store, ctx.user_key, 4000) == "About the user:\n- lives in Hamburg"


async def test_memory_bad_old_text(store):
    ctx = RecordingContext(store)
    await call(memory.memory, ctx, action="add", target="user", content="likes tea")
    await call(memory.memory, ctx, action="add", target="user", content="likes long walks")
    with pytest.raises(ToolError, match="old_text not found in user memory"):
        await call(memory.memory, ctx, action="replace", target="user", old_text="coffee", content="x")
    with pytest.raises(ToolError, match="old_text not found in notes memory"):
        await call(memory.memory, ctx, action="remove", target="notes", old_text="tea")
    with pytest.raises(ToolError, match="matches 2 user entries"):
        await call(memory.memory, ctx, action="remove", target="user", old_text="likes")
    with pytest.raises(ToolError, match="old_text is required"):
        await call(memory.memory, ctx, action="remove", target="user")
    with pytest.raises(ToolError, match="content is empty"):
        await call(memory.memory, ctx, action="add", target="user", content=" ")


async def test_memory_is_isolated_between_users(store):
    alice = RecordingContext(store, user_key="telegram:alice")
    bob = RecordingContext(store, user_key="slack:bob")
    await call(memory.memory, alice, action="add", target="user", content="door code 4471")
    assert await memory_prompt(store, bob.user_key, 4000) == ""
    with pytest.raises(ToolError, match="not found"):
        await call(memory.memory, bob, action="remove", target="user", old_text="door code 4471")
    await call(memory.memory, bob, action="add", target="user", content="door code 4471")  # not a duplicate for bob
    assert await memory_prompt(store, alice.user_key, 4000) == "About the user:\n- door code 4471"


async def test_memory_cap_refuses_with_sizes(store):
    ctx = RecordingContext(store, services={"memory": MemoryLimits(max_chars=60)})
    await call(memory.memory, ctx, action="add", target="user", content="a" * 30)  # renders to 48 chars
    with pytest.raises(ToolError, match="memory is full: 48 of 60 characters used, this change would make it 84"):
        await call(memory.memory, ctx, action="add", target="notes", content="b" * 20)
    with pytest.raises(ToolError, match="memory is full"):
        await call(memory.memory, ctx, action="replace", target="user", old_text="a" * 30, content="c" * 50)
    assert "(59/60 characters used)" in await call(memory.memory, ctx, action="replace", target="user",
                                                   old_text="a" * 30, content="c" * 41)


async def test_memory_prompt_drops_oldest_when_over_a_lowered_cap(store):
    ctx = RecordingContext(store)
    for fact in ("first fact", "second fact", "third fact"):
        await call(memory.memory, ctx, action="add", target="user", content=fact)
    assert await memory_prompt(store, ctx.user_key, 50) == "About the user:\n- second fact\n- third fact"


# -- sessions ---------------------------------------------------------------------------------------


async def _said(store, user_key: str, session_id: str, text: str) -> None:
    await Sessions(store).get_or_create(session_id, Origin(surface="console", chat_id=session_id), user_key)
    await Messages(store).add(MessageRecord(session_id=session_id, turn_id="t0", role="user", content=text,
                                            user_key=user_key))


async def test_session_search_finds_own_messages_with_dates_and_sessions(store):
    ctx = RecordingContext(store, session_id="console:test")
    await _said(store, ctx.user_key, "telegram:9", "the kitchen renovation starts in May")
    await _said(store, ctx.user_key, "console:test", "kitchen tiles: go with the green ones")
    await _said(store, "telegram:someone-else", "telegram:5", "my kitchen is on fire")
    hits = json.loads(ctx.unwrap(await call(sessions.session_search, ctx, query="kitchen")))
    assert ctx.external_sources == ["session_search"]
    assert [h["session"] for h in hits] == ["this chat", "telegram:9"]
    assert hits[1]["snippet"] == "the [kitchen] renovation starts in May"
    assert len(hits[0]["date"]) == len("2030-01-01 12:00") and hits[0]["role"] == "user"


async def test_session_search_input_is_quoted(store):
    ctx = RecordingContext(store)
    await _said(store, ctx.user_key, "console:test", 'she said "NEAR" OR maybe not')
    # FTS5 syntax in the query is literal text: no error, and no operator semantics.
    async def search(query: str) -> list:
        return json.loads(ctx.unwrap(await call(sessions.session_search, ctx, query=query)))

    for query in ['"NEAR" OR*', "NEAR(said maybe)", "said AND", "-maybe", 'a"b', "content:said"]:
        assert await search(query) == [], query
    assert [h["snippet"] for h in await search('said "NEAR"')] == ['she [said] ["NEAR"] OR maybe not']
    assert len(await search("maybe NOT")) == 1  # NOT is a word here
    with pytest.raises(ToolError, match="query is empty"):
        await call(sessions.session_search, ctx, query="  ")


# -- messaging --------------------------------------------------------------------------------------


async def test_messaging_status_reports_surfaces(store):
    ctx = RecordingContext(store, services={"surfaces": {"telegram": "up", "slack": "down"}})
    assert await call(messaging.messaging_status, ctx) == {
        "surfaces": {"telegram": "up", "slack": "down"}, "this_chat": "console"}
    with pytest.raises(ToolError, match="not available"):
        await call(messaging.messaging_status, RecordingContext(store))


async def test_notify_and_send_reach_only_the_current_user(store):
    ctx = RecordingContext(store)
    assert await call(messaging.notify_user, ctx, text="build finished") == {"message_id": 1, "state": "pending"}
    await call(messaging.send_message, ctx, text="one", to="user")
    await call(messaging.send_message, ctx, text="two", to="origin")
    await call(messaging.send_message, ctx, text="three", to="test")  # the current chat id
    assert ctx.sent == [(t, ctx.origin) for t in ("build finished", "one", "two", "three")]
    for to in ("+15551234", "brother", "telegram:42", "slack:C1"):
        with pytest.raises(ToolError, match=f"cannot send to '{re.escape(to)}'.*only reaches the current user"):
            await call(messaging.send_message, ctx, text="hi", to=to)
    with pytest.raises(ToolError, match="text is empty"):
        await call(messaging.notify_user, ctx, text=" ")
    assert len(ctx.sent) == 4


async def test_message_receipt_only_for_the_current_chat(store):
    box = Outbox(store)
    here = await box.enqueue(Outbound(origin=Origin(surface="console", chat_id="test", thread_id="th"), text="a"))
    elsewhere = await box.enqueue(Outbound(origin=Origin(surface="console", chat_id="other"), text="b"))
    other_surface = await box.enqueue(Outbound(origin=Origin(surface="slack", chat_id="test"), text="c"))
    await box.mark_sent(here, "p1")
    ctx = RecordingContext(store)
    receipt = await call(messaging.message_receipt, ctx, message_id=here)
    assert receipt["message_id"] == here and receipt["state"] == "sent" and "sent_at" in receipt
    for item in (elsewhere, other_surface, 999):
        with pytest.raises(ToolError, match=f"message {item} not found in this chat"):
            await call(messaging.message_receipt, ctx, message_id=item)


# -- clarify ----------------------------------------------------------------------------------------


async def test_clarify_posts_question_with_options(store):
    ctx = RecordingContext(store)
    result = await call(clarify.clarify, ctx, question="Which hotel?", options=[" Ritz ", "Hilton"])
    assert "next message" in result
    await call(clarify.clarify, ctx, question="What time suits you?")
    assert ctx.asked == [("Which hotel?", ["Ritz", "Hilton"]), ("What time suits you?", [])]


@pytest.mark.parametrize(("options", "error"), [
    (["only"], "2 to 4 options"),
    (["a", "b", "c", "d", "e"], "2 to 4 options"),
    (["a", "a"], "different"),
    (["a", " "], "non-empty"),
    (["a", "x" * 65], "under 64 characters"),
])
async def test_clarify_rejects_bad_options(store, options, error):
    ctx = RecordingContext(store)
    with pytest.raises(ToolError, match=error):
        await call(clarify.clarify, ctx, question="?", options=options)
    assert ctx.asked == []


# -- loader -----------------------------------------------------------------------------------------


async def test_loader_loads_known_and_reports_unknown(store):
    loader = loader_tool([tasks.TOOLSET, memory.TOOLSET])
    ctx = RecordingContext(store)
    result = await call(loader, ctx, names=["memory", "email", "memory"])
    assert result == "Loaded: memory. Their tools are available now. Unknown, ignored: email."
    assert ctx.loaded == ["memory"]
    with pytest.raises(ToolError, match=r"unknown toolset.*email, calendar; available: tasks, memory"):
        await call(loader, ctx, names=["email", "calendar"])
    assert ctx.loaded == ["memory"]
