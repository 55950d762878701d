"""Streamed completions, both wire formats, against the fake model server streaming real SSE."""

from __future__ import annotations

import json
import re

import pytest

from gateway.llm import ModelUnavailable
from gateway.llm.types import ModelCutOff
from tests.fixtures.model import FakeModel, cut_off, reply, status, tool_call
from tests.support.model_stream import Pace
from tests.test_llm import TASK_TOOL, client, user

TEXT = "The quick brown fox jumps over the lazy dog. Then it naps."


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    """Both wire formats, as in tests/test_llm.py (and tests/test_vision.py)."""
    return request.param


class Pieces(list[str]):
    async def __call__(self, text: str) -> None:
        self.append(text)


async def test_streamed_text_arrives_in_pieces_and_whole(provider: str, model: FakeModel) -> None:
    model.script(reply(TEXT, usage=(40, 13, 8)))
    pieces = Pieces()
    async with client(provider, model) as c:
        answer = await c.complete(user("hello"), [], on_text=pieces)
    assert len(pieces) == len(TEXT.split()) and "".join(pieces) == TEXT
    assert (answer.text, answer.tool_calls, answer.model) == (TEXT, [], "main")
    # Usage is read from the stream's last events: the same figures a whole reply reports.
    assert answer.usage.model_dump() == {"input_tokens": 40, "output_tokens": 13, "cached_tokens": 8}
    [sent] = model.requests
    assert sent.body["stream"] is True
    if provider == "openai":
        assert sent.body["stream_options"] == {"include_usage": True}


async def test_line_separators_inside_the_json_do_not_break_an_event(provider: str, model: FakeModel) -> None:
    # SSE lines end at CR, LF or CRLF only; U+2028, U+2029 and U+0085 may stand raw in a JSON string
    # and must not split its data line (str.splitlines would).
    text = "第一行\u2028second\u2029third\x85fourth é"
    model.script(reply(text))
    pieces = Pieces()
    async with client(provider, model) as c:
        answer = await c.complete(user("hello"), [], on_text=pieces)
    assert answer.text == text and "".join(pieces) == text


async def test_streamed_tool_call_is_returned_whole(provider: str, model: FakeModel) -> None:
    model.script(tool_call("task_create", {"title": "milk and eggs"}, "call_1", text="On it."))
    pieces = Pieces()
    async with client(provider, model) as c:
        answer = await c.complete(user("remind me"), [TASK_TOOL], on_text=pieces)
    assert "".join(pieces) == "On it." and answer.text == "On it."
    [call] = answer.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("call_1", "task_create", {"title": "milk and eggs"})


async def test_failure_before_the_first_text_is_retried(provider: str, model: FakeModel) -> None:
    model.script(status(503), reply("fine now"))
    pieces = Pieces()
    async with client(provider, model) as c:
        answer = await c.complete(user("x"), [], on_text=pieces)
    assert answer.text == "fine now" and pieces == ["fine", " now"] and len(model.requests) == 2


async def test_refusal_of_a_streamed_request_is_not_retried(provider: str, model: FakeModel) -> None:
    model.script(status(401))
    async with client(provider, model) as c:
        with pytest.raises(ModelUnavailable, match="check the API key"):
            await c.complete(user("x"), [], on_text=Pieces())
    assert len(model.requests) == 1


async def test_stream_cut_after_text_is_not_restarted(provider: str, model: FakeModel) -> None:
    model.script(cut_off(TEXT, after=3), reply("a second, different beginning"))
    pieces = Pieces()
    async with client(provider, model) as c:
        with pytest.raises(ModelCutOff) as caught:
            await c.complete(user("x"), [], on_text=pieces)
    assert "".join(pieces) == "The quick brown"
    assert str(caught.value).startswith("the reply was cut off: ")
    assert len(model.requests) == 1  # no silent restart


async def test_silent_stream_times_out_per_piece(provider: str, model: FakeModel) -> None:
    model.pace = Pace(first_token_s=0.0, tokens_per_s=2)  # 0.5 s between pieces, above the 0.3 s timeout
    model.script(reply("one two three"))
    pieces = Pieces()
    async with client(provider, model, timeout_s=0.3) as c:
        with pytest.raises(ModelCutOff, match=re.escape("no data for 0.3s")):
            await c.complete(user("x"), [], on_text=pieces)
    assert pieces == ["one"]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
async def test_sse_lines_end_at_cr_lf_or_crlf_wherever_the_chunks_are_cut(ending: str) -> None:
    from gateway.llm.sse import sse_lines

    stream = f"data: {{\"t\": \"a\u2028b 好\"}}{ending}{ending}: keep-alive{ending}data: last".encode()

    async def one_byte_chunks():  # cuts every CRLF and every multi-byte character in two
        for i in range(len(stream)):
            yield stream[i:i + 1]

    lines = [line async for line in sse_lines(one_byte_chunks())]
    assert lines == ['data: {"t": "a\u2028b 好"}', "", ": keep-alive", "data: last"]
