"""What a provider's prompt cache can reuse: every request of a chat repeats the one before it as its
prefix (what was sent, less the turn's `<context>` block), so OpenAI, DeepSeek and Gemini, which cache the
longest prefix seen before, read the whole history from their cache; on Anthropic, whose cache is
keyed at `cache_control` breakpoints, the history breakpoint of one request lies within the ~20 blocks the
API looks back from the next one's, on a prefix that is byte for byte the same ("Prompt caching": at most
four breakpoints, none on a thinking block). Driven through `anyy chat` with a tool turn, on the fake
model enforcing Anthropic's documented rules."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.anthropic_rules import AnthropicThinking, breakpoints
from tests.support.cli import anyy, write_config
from tests.support.model_wire import ModelRequest

LOOKBACK = 20  # blocks the API checks for an earlier cache entry before a breakpoint ("Prompt caching")
SAID = "add task milk\nthanks\nand what is left to do?\n"


async def _chat(tmp_path: Path, home: dict[str, str], model: FakeModel, provider: str, extra: str = "",
                requests: int = 4) -> None:
    url = model.url_anthropic if provider == "anthropic" else model.url_openai
    cfg = write_config(tmp_path, f'[model]\nprovider = "{provider}"\nbase_url = "{url}"\nmodel = "m"\n'
                                 f"max_retries = 0\n{extra}")
    code, out, err = await anyy("chat", "--config", cfg, env=home, stdin=SAID)
    assert code == 0 and "Added." in out and "Nothing else." in out, out + err
    assert len(model.requests) == requests and model.remaining == 0


async def test_each_request_repeats_the_one_before_as_its_prefix(tmp_path: Path, home: dict[str, str],
                                                                 model: FakeModel) -> None:
    model.script(tool_call("task_create", {"title": "milk"}), reply("Added."), reply("You're welcome."),
                 reply("Nothing else."))
    await _chat(tmp_path, home, model, "openai")
    requests = model.requests
    system = requests[0].messages[0]
    assert "Current time" not in system["content"]  # a clock here would change the first bytes every minute
    for before, after in itertools.pairwise(requests):
        assert after.messages[0] == system
        assert after.said[:len(before.messages)] == before.said, (before.body, after.body)
    for request in requests:  # the context rides on the turn's own message, after the person's words
        [carrier] = [m for m, s in zip(request.messages, request.said, strict=True) if m != s]
        assert carrier["role"] == "user" and carrier["content"].endswith("</context>")
        assert "Current time:" in request.context
    assert requests[3].said[-1] == {"role": "user", "content": "and what is left to do?"}


def _blocks(request: ModelRequest) -> list[str]:
    """The request's message blocks in order, each as canonical JSON without its cache marker."""
    return [json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)
            for m in request.messages for block in m["content"]]


def _marks(request: ModelRequest) -> list[int]:
    """Where the request's message blocks carry a breakpoint."""
    return [i for i, b in enumerate(b for m in request.messages for b in m["content"]) if "cache_control" in b]


def _finds_an_entry(request: ModelRequest, earlier: list[ModelRequest]) -> bool:
    """Whether one of `request`'s breakpoints finds a cache entry an earlier request wrote at one of its
    own: the same blocks up to it, within the API's look-back."""
    blocks = _blocks(request)
    return any(blocks[:p + 1] == _blocks(e)[:p + 1] and 0 <= q - p <= LOOKBACK
               for e in earlier for p in _marks(e) for q in _marks(request))


@pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
async def test_anthropic_reads_the_history_from_an_earlier_requests_breakpoint(
        tmp_path: Path, home: dict[str, str], model: FakeModel, thinking: bool) -> None:
    rules = AnthropicThinking(redacted=True)
    model.rules.append(rules)
    calls, answer = (rules.calls, rules.reply) if thinking else \
        (lambda *c: tool_call(*c[0]), lambda text: reply(text))
    # turn 1: a tool round then the answer; turn 2: an answer; turn 3: a tool round then the answer
    model.script(calls(("task_create", {"title": "milk"})), answer("Added."), answer("You're welcome."),
                 calls(("task_list", {})), answer("Nothing else."))
    await _chat(tmp_path, home, model, "anthropic", "max_tokens = 4096\nthinking = { budget_tokens = 2048 }\n"
                if thinking else "", requests=5)
    requests = model.requests
    system: Any = requests[0].body["system"]
    assert system[-1]["cache_control"] == {"type": "ephemeral"} and "Current time" not in json.dumps(system)
    assert all(r.body["system"] == system for r in requests)
    assert [len(_marks(r)) for r in requests] == [0, 1, 1, 1, 2]  # history and/or the tool loop
    assert all(len(breakpoints(r.body)) == 2 + len(_marks(r)) for r in requests)  # with tools and system
    # Turn 2 finds nothing yet (turn 1's only mark holds its context); from turn 3 on each request does.
    assert not _finds_an_entry(requests[2], requests[:2])
    assert _finds_an_entry(requests[3], requests[:3]) and _finds_an_entry(requests[4], requests[:4])
    assert not [b for r in requests for b in breakpoints(r.body) if b.get("type") in ("thinking", "redacted_thinking")]


async def test_the_history_start_changes_only_when_a_new_summary_begins_it(start_console, make_config, model):
    # Compaction comes before the window is full: it never slides a turn at a time (each slide would change
    # the start of the history, and so miss the prompt cache, on every request).
    h = await start_console(make_config(runtime={"context_budget": 12_000}))

    def summariser(body: dict[str, Any]) -> bool:
        return str(body["messages"][0]["content"]).startswith("You maintain the memory")

    written = itertools.count(1)
    model.responder = lambda body: reply(f"SUMMARY {next(written)}: errands" if summariser(body)
                                         else "Noted. " + "z" * 300)
    for i in range(60):  # ~450 characters a turn: a compaction every ~20 turns
        await h.say(f"errand {i}: " + "x" * 130)
    chats = [r for r in model.requests if not summariser(r.body)]
    last_chat = model.requests.index(chats[-1])
    summaries = sum(1 for r in model.requests[:last_chat] if summariser(r.body))  # a later one begins nothing
    assert summaries >= 2
    misses = [(before, after) for before, after in itertools.pairwise(chats)
              if after.said[:len(before.said)] != before.said]
    assert len(misses) == summaries, [after.said[1]["content"][:60] for _, after in misses]
    for before, after in misses:  # each one starts with a summary the request before did not have
        assert after.said[1]["content"].startswith("[summary of the earlier conversation")
        assert after.said[1] != before.said[1]
