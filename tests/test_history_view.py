"""The history window's view kept with its rows (gateway/turns/history.py): turn after turn, as the
window grows and loses its oldest turns, the view and the outside sources it reports are exactly what
converting and fitting all the rows afresh gives, orphans, images and tainted rows included."""

import pytest

from gateway.turns.history import external_sources, fit_history
from gateway.turns.window_cache import HistoryWindows
from store.messages import Messages
from store.records import MessageRecord, Origin, ToolCallRecord
from store.sessions import Sessions

pytestmark = pytest.mark.both_backends

SID = "console:view"
IMAGE = {"mime_type": "image/png", "data": "aGk="}


def turn(i: int) -> list[MessageRecord]:
    """Turn i: plain, a tool call answered, a call left unanswered (a crash), an image, outside content."""
    t = f"t{i}"
    rows = [MessageRecord(session_id=SID, turn_id=t, role="user", content=f"question {i}?",
                          meta={"images": [IMAGE]} if i in (3, 40) else {})]
    if i % 3 == 1:
        call = ToolCallRecord(id=f"c{i}", name="web_fetch", arguments='{"url": "x"}')
        rows.append(MessageRecord(session_id=SID, turn_id=t, role="assistant", content="", tool_calls=[call]))
        if i not in (13, 49):  # now and then the result never came
            rows.append(MessageRecord(session_id=SID, turn_id=t, role="tool", content="page", tool_call_id=f"c{i}",
                                      tool_name="web_fetch", meta={"external": [f"web:{i % 4}"]}))
    rows.append(MessageRecord(session_id=SID, turn_id=t, role="assistant", content=f"answer {i} " + "x" * 300))
    return rows


@pytest.mark.parametrize("max_messages", [200, 8])  # bound by the characters, or by the count first
async def test_the_view_and_sources_kept_with_the_window_are_those_computed_afresh(store, max_messages):
    messages = Messages(store)
    await Sessions(store).get_or_create(SID, Origin(surface="console", chat_id="view"), "console:me")
    windows = HistoryWindows(messages, budget_chars=6_000, max_messages=max_messages)
    fast_paths = 0
    for i in range(60):
        await messages.add_many(turn(i))
        rows = await windows.load(SID, 0)
        new = MessageRecord(session_id=SID, turn_id=f"n{i}", role="user", content=f"next {i}")
        for current in (rows, [*rows, new]):  # as a turn sees it: the window, then its own new message
            expected = fit_history(current, 6_000, max_messages=max_messages)
            got = windows.view(SID, current)
            assert [m.model_dump() for m in got] == [m.model_dump() for m in expected]
            assert windows.external_sources(SID, current) == external_sources(current)
        fast_paths += not any(m.meta.get("images") for m in rows) and all(
            any(c.id == r.tool_call_id for r in rows) for m in rows for c in m.tool_calls)
    assert windows.dropped(SID)  # the window lost turns on the way
    assert fast_paths > 5  # and the view kept with it was used, not only the full path
