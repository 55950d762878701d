"""The window is bounded by its number of messages as well as by characters: short messages no longer fill it
with a thousand; it is cut by whole turns (a tool call keeps its result), the same whether kept turn after
turn or read afresh, and what leaves it is summarised like what leaves the character budget."""

import pytest

from gateway.llm.types import ToolCall
from gateway.turns.window_cache import HistoryWindows
from store.messages import Messages
from store.records import MessageRecord, Origin
from store.sessions import Sessions
from tests.fixtures.model import reply
from tests.support.model_wire import last_user_text

pytestmark = pytest.mark.both_backends

SID = "console:short"


def turn(i: int) -> list[MessageRecord]:
    """A short turn; every third one calls a tool (the call and its result are two more rows)."""
    rows = [MessageRecord(session_id=SID, turn_id=f"t{i}", role="user", content=f"hi {i}")]
    if i % 3 == 0:
        call = ToolCall(id=f"c{i}", name="task_list", arguments="{}")
        rows += [MessageRecord(session_id=SID, turn_id=f"t{i}", role="assistant", content="", tool_calls=[call]),
                 MessageRecord(session_id=SID, turn_id=f"t{i}", role="tool", content="[]", tool_call_id=f"c{i}",
                               tool_name="task_list")]
    return [*rows, MessageRecord(session_id=SID, turn_id=f"t{i}", role="assistant", content=f"ok {i}")]


def whole_turns(rows: list[MessageRecord]) -> bool:
    """Every turn in `rows` starts with its user message, and every result follows its call."""
    called = {c.id for m in rows for c in m.tool_calls}
    starts = [i for i, m in enumerate(rows) if i == 0 or m.turn_id != rows[i - 1].turn_id]
    paired = all(m.tool_call_id in called for m in rows if m.role == "tool")
    return paired and all(rows[i].role == "user" for i in starts)


async def test_many_short_turns_keep_the_window_to_its_message_count_by_whole_turns(store):
    messages = Messages(store)
    await Sessions(store).get_or_create(SID, Origin(surface="console", chat_id="short"), "console:me")
    windows = HistoryWindows(messages, budget_chars=48_000, max_messages=25)
    for i in range(120):  # topped up a turn at a time, as turns do: far past the count, far within the characters
        await messages.add_many(turn(i))
        rows = await windows.load(SID, 0)
        assert len(rows) <= 25 and whole_turns(rows), [(m.turn_id, m.role) for m in rows]
    assert rows[-1].content == "ok 119" and len(rows) > 20  # the newest turns, as many as fit
    assert windows.dropped(SID) and windows.fill(SID) >= 0.75  # compaction has work
    fresh = HistoryWindows(messages, budget_chars=48_000, max_messages=25)
    again = await fresh.load(SID, 0)
    assert [m.id for m in again] == [m.id for m in rows]  # the same window when read afresh
    assert fresh.view(SID, again) == windows.view(SID, rows)
    assert len(windows.view(SID, rows)) == len(rows)
    unbounded = HistoryWindows(messages, budget_chars=48_000, max_messages=10_000)
    assert len(await unbounded.load(SID, 0)) > 300  # without the count, the characters alone let it grow


async def test_short_turns_past_the_message_count_are_summarised(start_console, make_config, model):
    h = await start_console(make_config(runtime={"context_max_messages": 12}))
    summarised: list[str] = []
    asked: list[list[dict]] = []  # each turn's request: the history the model saw

    def responder(body):
        if str(body["messages"][0].get("content", "")).startswith("You maintain the memory"):
            summarised.append(body["messages"][-1]["content"])
            return reply("SUMMARY: short turns")
        asked.append(body["messages"])
        return reply(f"echo: {last_user_text(body)}")

    model.responder = responder
    for i in range(12):
        await h.say(f"short {i}")
    assert summarised and "short 0" in summarised[0], "no summary once the count overflowed"
    assert all(len(messages) <= 1 + 12 + 1 for messages in asked)  # system, the window, the turn's message
    assert any(str(m.get("content", "")).startswith("[summary of the earlier") for m in asked[-1])
