"""Toolset selection: what is selected and why, pins, attachments, availability, stable tool arrays."""

import json
import re
from pathlib import Path

import pytest

from gateway.selection import keywords
from gateway.selection.keywords import matcher
from gateway.selection.selector import Selection, describe_selection, describe_tools, select_toolsets, tools_for
from toolsets import clarify, memory, messaging, sessions, tasks
from toolsets.base import Toolset
from toolsets.loader import loader_tool
from toolsets.registry import TOOLSETS

CORE = [sessions.TOOLSET, memory.TOOLSET, tasks.TOOLSET, messaging.TOOLSET, clarify.TOOLSET]
CORPUS = Path(__file__).parents[1] / "bench" / "selection_corpus.jsonl"


def make_toolset(name: str, *keywords: str, requires: str | None = None) -> Toolset:
    return Toolset(name, f"{name} things", keywords=keywords, requires=requires)


def pick(text: str, available=CORE, **kw) -> Selection:
    args = {"has_attachments": False, "recent": [], "pins": None} | kw
    return select_toolsets(text, available=available, **args)


@pytest.mark.parametrize(("text", "names"), [
    ("add buy milk to my todo list", ["tasks"]),
    ("Remember that I'm vegetarian", ["memory"]),
    ("what did we say about the kitchen renovation last week?", ["sessions"]),
    ("is telegram working?", ["messaging"]),
    ("give me a few options to choose from", ["clarify"]),
    ("what did we decide about the budget? add it as a task", ["sessions", "tasks"]),
    ("thanks!", []),
    ("what's the capital of Australia", []),
    ("把买牛奶加到待办清单", ["tasks"]),
    ("记住我不吃香菜", ["memory"]),
    ("上次说的那个餐厅叫什么名字", ["sessions"]),
    ("你好", []),
])
def test_keywords_in_english_and_chinese(text, names):
    assert pick(text).names == names


@pytest.mark.parametrize("text", ["tell me when CI posts", "when the bank writes, tell me",
                                  "ten minutes before each meeting send me the agenda",
                                  "every morning at 7:30 give me a briefing",
                                  "let me know whenever my landlord emails"])
def test_trigger_requests_load_the_automation_toolset_by_keyword(text):
    """An event trigger (issue 41) is made with automation_create: the request must load it."""
    assert pick(text, available=TOOLSETS).reasons.get("automation", "").startswith("keyword")


@pytest.mark.parametrize(("text", "names"), [
    ("schedule a call with Ben on Friday at 3", ["calendar"]),  # a clock time alone is no reminder
    ("nudge me at 4 to leave for the airport", ["automation"]),
    ("ping me in an hour to stretch", ["automation"]),  # not messaging: "ping me" with a time
    ("every weekday at 8:30 tell me the weather", ["automation"]),  # its runs pick web from their own prompt
    ("每天早上七点告诉我天气", ["automation"]),
    ("is it going to rain in Paris tomorrow?", ["web"]),
    ("明天北京天气怎么样", ["web"]),
    ("are you online on slack too?", ["messaging"]),
    ("search online for a lasagne recipe", ["web"]),
    ("I need to file my taxes", ["tasks"]),  # "file" the verb
    ("open the config file", ["file"]),
    ("fix the typo in todo.md", ["file"]),  # a file name, not the to-do list
    ("what does the pdf I sent you say?", ["artifact"]),
    ("start a background task to summarise my notes", ["subagents"]),
    ("call me Sam from now on", ["memory"]),
])
def test_phrases_not_bare_words_decide_among_all_toolsets(text, names):
    """Words that several toolsets share (a time, "file", "online", "weather", "task") count only in the
    phrase that makes them one toolset's."""
    assert pick(text, available=TOOLSETS).names == names


def test_reasons_name_the_matched_keyword_and_names_follow_available_order():
    selection = pick("add it as a TASK, and remember I hate mornings")
    assert selection.names == ["memory", "tasks"]  # CORE order, not the order in the text
    assert selection.reasons == {"tasks": "keyword 'TASK'", "memory": "keyword 'remember'"}
    assert not selection.pinned


def test_recent_use_keeps_toolsets_for_follow_ups():
    selection = pick("yes, do it", recent=["tasks", "email"])  # email is not available: ignored
    assert selection.names == ["tasks"]
    assert selection.reasons == {"tasks": "used in the last turns"}


def test_pins_are_exact():
    selection = pick("remind me to add a task, see attachment", recent=["sessions"], has_attachments=True,
                     pins=["clarify", "memory", "email"], available=[*CORE, make_toolset("artifact")])
    assert selection.names == ["memory", "clarify"]
    assert selection.reasons == {"memory": "pinned", "clarify": "pinned"}
    assert selection.pinned and selection.unavailable == ["email"]
    assert pick("add a task", pins=[]).names == []


def test_attachments_add_the_artifact_toolset_only_when_it_exists():
    artifact = make_toolset("artifact")
    assert pick("what is this?", has_attachments=True, available=[*CORE, artifact]).reasons == {
        "artifact": "attachment"}
    assert pick("what is this?", has_attachments=False, available=[*CORE, artifact]).names == []
    assert pick("what is this?", has_attachments=True).names == []


def test_a_toolset_that_is_not_available_is_never_selected():
    email = make_toolset("email", r"\bemails?\b", r"邮件", requires="email")
    assert pick("check my email", available=[*CORE, email]).names == ["email"]
    for kw in ({}, {"recent": ["email"]}, {"pins": ["email"]}):
        assert "email" not in pick("check my email 邮件", **kw).names
    assert loader_tool(CORE).description.count("\n- ") == len(CORE)
    assert "email" not in loader_tool(CORE).description


def test_loader_description_lists_available_toolsets_one_line_each():
    loader = loader_tool([sessions.TOOLSET, memory.TOOLSET])
    assert loader.description.splitlines()[1:] == [
        f"- sessions: {sessions.TOOLSET.description}", f"- memory: {memory.TOOLSET.description}"]
    assert loader.name == "load_toolsets" and loader.toolset == "loader"
    assert loader_tool([sessions.TOOLSET, memory.TOOLSET]) is loader  # cached: same bytes every turn
    assert loader_tool([memory.TOOLSET, sessions.TOOLSET]) is not loader


def test_tool_arrays_are_byte_identical_for_the_same_selection():
    loader = loader_tool(CORE)

    def wire(names: list[str]) -> str:
        return json.dumps([t.schema() for t in tools_for(names, CORE, loader)], separators=(",", ":"))

    first = wire(pick("remember to add a task").names)
    assert first == wire(pick("task... and remember!").names)
    assert first == wire(["tasks", "memory"]) == wire(["memory", "tasks", "memory"])
    tools = tools_for(["tasks", "memory"], CORE, loader_tool(list(CORE)))
    assert [t.name for t in tools] == ["load_toolsets", "memory", "task_create", "task_list", "task_update",
                                       "task_complete"]
    assert first != wire(["tasks"])


def test_long_messages_are_scanned_at_start_and_end():
    filler = "lorem ipsum " * 500
    assert pick(f"{filler} add it as a task").names == ["tasks"]
    assert pick(f"remember this: {filler}").names == ["memory"]
    assert pick(f"{filler[:3000]} a todo buried in the middle {filler[:3000]}").names == []


def test_describe_selection_and_tools_for_the_commands():
    selection = pick("remember my todo list", recent=["sessions"])
    text = describe_selection(selection, CORE)
    assert "(automatic)" in text
    assert "• memory: keyword 'remember'" in text and "• tasks: keyword 'todo'" in text
    assert "• sessions: used in the last turns" in text
    assert "Available: sessions, memory, tasks, messaging, clarify" in text
    pinned = describe_selection(pick("hi", pins=["memory", "email"]))
    assert "(pinned)" in pinned and "Pinned but not available here: email" in pinned
    assert "• none" in describe_selection(pick("hi"))

    tools = tools_for(["memory", "clarify"], CORE, loader_tool(CORE))
    listing = describe_tools(tools)
    assert listing.startswith("3 tools visible (")
    assert listing.splitlines()[1:] == ["• loader: load_toolsets (read, direct)",
                                        "• memory: memory (runtime-low, audit)",
                                        "• clarify: clarify (read, direct)"]


def test_selection_round_trips_through_the_session_record():
    selection = pick("remember my todo list", recent=["sessions"])
    assert Selection.model_validate(json.loads(json.dumps(selection.model_dump()))) == selection


# Upper-case literals, and a needle ("Strasse") that is not at the start of its match.
TRICKY = make_toolset("tricky", r"\bTelegram\b", r"\b(?:Foo|BAR)baz", r"\bmy Strasse\b")


@pytest.mark.parametrize("ts", [*TOOLSETS, TRICKY], ids=lambda ts: ts.name)
def test_gated_matching_agrees_with_plain_regex_search(ts):
    """The needle gate is an optimization only: on every corpus message (and on tricky casing) it decides
    exactly as a plain case-insensitive search of each keyword would."""
    texts = [json.loads(line)["text"] for line in CORPUS.read_text("utf-8").splitlines()]
    texts += ["MULTITASKING", "Straße TASK", "ǅ todo", "İ remember", "x" * 3000 + " task", "TELEGRAM", "barBAZ",
              # casefolding lengthens "ß", so offsets in the folded text run ahead of the original's
              "Straße " * 12 + "keep that in mind", "Straße " * 12 + "my strasse"]
    keyword_matcher = matcher(ts.keywords)
    for text in texts:
        expected = any(re.search(k, text, re.IGNORECASE) for k in ts.keywords)
        assert (keyword_matcher.search(text, text.casefold()) is not None) == expected, text


@pytest.mark.parametrize(("pattern", "needles", "width"), [
    (r"\bmail(?:s|box|ed|ing)?\b", {"mail"}, 7),
    (r"\be-?mails?\b", {"mail"}, 7),
    (r"\b(?:old|past) (?:chats?|messages?)\b", {"chat", "message"}, 13),
    (r"\bremind(?:er)? me\b", {"remind"}, 11),
    (r"\bwhat'?s (?:on|planned) (?:today|this (?:week|month))\b", {"today", "this "}, 25),
    (r"(?<!\w)abc[.]defg\b", {"defg"}, 8),
    (r"\bat\s+\d{1,2}(?::\d{2})?\s*(?:am|pm)?\b", {"at"}, keywords.UNBOUNDED),
    (r"邮件", {"邮件"}, 2),
])
def test_needles_are_read_from_the_pattern_text(pattern, needles, width):
    found, found_width = keywords.needles_of(pattern)
    assert found is not None and set(found) == needles
    assert found_width == width


@pytest.mark.parametrize("pattern", [r"(?i)abc", r"(?P<x>abc)", r"\x41bc", r"abc\1", r"abc["])
def test_syntax_the_scanner_does_not_follow_runs_ungated(pattern):
    assert keywords.needles_of(pattern) == (None, keywords.UNBOUNDED)


def test_every_registered_keyword_but_a_few_short_ones_is_gated():
    ungated = [k for ts in TOOLSETS for k in ts.keywords
               if (n := keywords.needles_of(k)[0]) is None or min(len(x.encode()) for x in n) < 3]
    assert len(ungated) <= 7, ungated  # "at", "in", "cc", and the two-letter commands df, du, ls
