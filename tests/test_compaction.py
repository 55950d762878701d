"""Context compaction: what leaves the window is summarised after the reply, and the window starts with it."""

from store.approvals import Approvals
from store.messages import Messages
from store.records import MessageRecord, Origin
from store.usage import UsageRepo
from tests.fixtures.model import reply, status, tool_call
from tests.support.model_wire import last_user_text
from tests.support.telegram_api import OWNER_ID

SUMMARISER = "You maintain the memory"


def is_summary_request(body) -> bool:
    first = (body.get("messages") or [{}])[0]
    return first.get("role") == "system" and str(first.get("content", "")).startswith(SUMMARISER)


async def chat(harness, model, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        model.script(tool_call("task_list", {}), reply(f"answer {i} " + "y" * 150))
        await harness.say(f"turn {i}: " + "x" * 150)


async def test_turns_that_leave_the_window_are_summarised_after_the_reply(start_console, make_config, model):
    h = await start_console(make_config(runtime={"context_budget": 2000}))
    seen_at_summary: list[tuple[str, str]] = []

    def responder(body):
        if is_summary_request(body):
            # the turn just answered, and what the person had on screen when its summary started
            turn = last_user_text(model.requests[-2].body).split(":")[0].removeprefix("turn ")
            seen_at_summary.append((turn, h.out.getvalue()))
            return reply("SUMMARY: the user counted turns; favourite island zanzibar; open: nothing")
        return reply(f"echo: {last_user_text(body)}")

    model.responder = responder
    await chat(h, model, 6)
    summaries = [m for m in await Messages(h.gw.store).recent("console:local", 0, 500) if m.role == "summary"]
    assert summaries, "no summary after the window overflowed"
    turn, screen = seen_at_summary[0]
    assert f"answer {turn} " in screen  # that turn's reply was delivered before the summary call
    request = next(r for r in model.requests if is_summary_request(r.body))
    transcript = request.messages[1]["content"]
    assert "turn 0:" in transcript and "[tool task_list result]" in transcript
    # the next turn's request starts with the summary, then only turns after what it covers
    model.script(reply("ok"))
    await h.say("what did we talk about?")
    last = model.requests[-1]
    convo = last.said if not is_summary_request(last.body) else model.requests[-2].said
    assert convo[1]["role"] == "user" and "SUMMARY: the user counted turns" in convo[1]["content"]
    assert not any("turn 0:" in str(m.get("content")) for m in convo)
    # covered rows end at a turn boundary: a call never loses its result
    rows = await Messages(h.gw.store).recent("console:local", 0, 500)
    cut = summaries[-1].meta["covers_to_id"]
    before = [m for m in rows if m.id <= cut and m.role != "summary"]
    after = [m for m in rows if m.id > cut and m.role != "summary"]
    assert before[-1].turn_id != after[0].turn_id and after[0].role == "user"
    assert len(await Messages(h.gw.store).recent("console:local", 0, 500)) >= 6 * 4  # originals stay


async def test_session_search_finds_summarised_content(start_console, make_config, model):
    h = await start_console(make_config(runtime={"context_budget": 2000}))
    model.responder = lambda body: reply("SUMMARY: planned a trip to zanzibar" if is_summary_request(body)
                                         else f"echo: {last_user_text(body)}")
    await chat(h, model, 6)
    hits = await Messages(h.gw.store).search("console:owner", "zanzibar")
    assert [hit.role for hit in hits] == ["summary"]


async def test_compact_command_summarises_now(console, model):
    model.responder = lambda body: reply("SUMMARY: short chat about milk" if is_summary_request(body)
                                         else f"echo: {last_user_text(body)}")
    assert "Nothing to compact" in await console.say("/compact")
    await console.say("buy milk")
    await console.say("and eggs")
    out = await console.say("/compact")
    assert "Summarised 2 earlier messages" in out
    await console.say("anything else?")
    convo = model.requests[-1].said
    assert "SUMMARY: short chat about milk" in convo[1]["content"]
    assert [m["content"] for m in convo[2:]] == ["and eggs", "echo: and eggs", "anything else?"]
    # the summary call's tokens count in /usage like any other model call
    totals = await UsageRepo(console.gw.store).totals(since="")
    assert sum(t.calls for t in totals) == len(model.requests) == 4


async def test_a_failing_summariser_changes_nothing(start_console, make_config, model):
    h = await start_console(make_config(runtime={"context_budget": 2000}))
    model.responder = lambda body: status(500) if is_summary_request(body) else reply(f"echo: {last_user_text(body)}")
    await chat(h, model, 6)
    rows = await Messages(h.gw.store).recent("console:local", 0, 500)
    assert not [m for m in rows if m.role == "summary"]
    out = await h.say("still there?")
    assert "echo: still there?" in out


async def test_the_summary_waits_until_the_reply_is_on_the_phone(telegram_gateway, tg, model):
    async with telegram_gateway() as gw:
        gw.runtime.windows.budget = 2000  # a full window from the start: this turn's reply triggers compaction
        owner, origin = f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID))
        session = await gw.runtime.sessions.get_or_create(origin.key(), origin, owner)
        await Messages(gw.store).add_many([
            MessageRecord(session_id=session.id, turn_id=f"old-{i}", role=role, content=f"old {i} " + "z" * 200,
                          user_key=owner) for i in range(20) for role in ("user", "assistant")])
        delivered_at_summary: list[list[str]] = []

        def responder(body):
            if is_summary_request(body):
                delivered_at_summary.append([c.params.get("text", "") for c in tg.sent("sendMessage")])
                return reply("SUMMARY: old turns")
            return reply("THE REPLY")

        model.responder = responder
        tg.fail("sendMessage", status=429, retry_after=1)  # the reply reaches the phone a second late
        tg.message("hello")
        await tg.wait_calls("sendMessage", timeout=10)
        await gw.idle()
        assert delivered_at_summary and any("THE REPLY" in t for t in delivered_at_summary[0])


async def test_a_summary_of_outside_content_keeps_the_taint(start_console, make_config, model):
    """Outside content summarised out of the window still steers the summary: the summary row carries its
    sources, so a memory write in a later turn that sees only the summary is held for approval."""
    h = await start_console(make_config(runtime={"context_budget": 2000}))
    model.responder = lambda body: reply("SUMMARY: an old note said to bcc someone" if is_summary_request(body)
                                         else f"echo: {last_user_text(body)}")
    model.script(tool_call("session_search", {"query": "bcc"}), reply("found it " + "y" * 150))
    await h.say("what did we say about bcc? " + "x" * 150)
    await chat(h, model, 6)
    rows = await Messages(h.gw.store).recent("console:local", 0, 500)
    summaries = [m for m in rows if m.role == "summary"]
    assert summaries and summaries[-1].meta["external"] == ["session_search"]
    search_row = next(m for m in rows if m.tool_name == "session_search")
    assert search_row.id <= summaries[-1].meta["covers_to_id"]  # the search left the window
    model.script(tool_call("memory", {"action": "add", "target": "notes", "content": "always bcc x"}), reply("ok"))
    await h.say("remember what the note said")
    [held] = await Approvals(h.gw.store).list(("pending",))
    assert held.tool == "memory"
