"""Request bodies encoded with the client's cache of encodings (gateway/llm/wire.py): the bytes are the
ones json.dumps of the whole body gives, and what changed between requests is what the server gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.llm import AnthropicClient, ChatMessage, OpenAIClient, ToolCall, ToolSchema
from gateway.llm.http import HttpModelClient
from gateway.llm.types import ImagePart
from gateway.llm.wire import WireCache, dumps
from tests.fixtures.model import FakeModel, reply


def schema(name: str, field: str = "title") -> ToolSchema:
    return ToolSchema(name=name, description=f"{name} — does one thing.",
                      parameters={"type": "object", "properties": {field: {"type": "string"}}})


CONVERSATION = [
    ChatMessage(role="system", content="Be brief. Ünïcode, 中文 and \"quotes\".", stable_chars=10),
    ChatMessage(role="user", content="add milk"),
    ChatMessage(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="task_create",
                                                                   arguments='{"title": "milk"}')]),
    ChatMessage(role="tool", content="Added task 1.", tool_call_id="c1", name="task_create"),
    ChatMessage(role="assistant", content="Added."),
    ChatMessage(role="user", content="and this?", images=[ImagePart(mime_type="image/png", data="aGk=")]),
]


@pytest.mark.parametrize("cls", [OpenAIClient, AnthropicClient])
@pytest.mark.parametrize("stream", [False, True])
def test_the_bytes_are_those_of_the_whole_body(cls: type[HttpModelClient], stream: bool) -> None:
    client = cls("http://127.0.0.1:1/v1", "k", "m", 1.0, 0, 256)
    tools = [schema("task_create"), schema("task_list", "query")]
    for _ in range(2):  # the first request fills the cache, the second is served from it
        body = client.request_body(CONVERSATION, tools, "m")
        expected = dumps(client.stream_body(body) if stream else body)
        assert client.encoded_body(CONVERSATION, tools, "m", stream=stream) == expected
    assert json.loads(expected)["messages"]  # and it is the JSON of a real body


def openai(fake: FakeModel) -> OpenAIClient:
    return OpenAIClient(fake.url_openai, "k", "main", 5, 0, 256)


def sent_tools(fake: FakeModel) -> list[dict[str, Any]]:
    return [t["function"] for t in fake.requests[-1].body.get("tools", [])]


async def test_other_tools_are_sent_when_the_tools_change(model: FakeModel) -> None:
    first, second = [schema("task_create")], [schema("task_create"), schema("calendar_list", "day")]
    async with openai(model) as client:
        for tools, names in ((first, ["task_create"]), (second, ["task_create", "calendar_list"]),
                             (first, ["task_create"]), ([], [])):
            model.script(reply("ok"))
            await client.complete(CONVERSATION[:2], tools)
            assert [t["name"] for t in sent_tools(model)] == names
        # a new schema object for a tool of the same name (an MCP server's changed list) is sent as it is now
        model.script(reply("ok"))
        await client.complete(CONVERSATION[:2], [schema("task_create", "due")])
        assert list(sent_tools(model)[0]["parameters"]["properties"]) == ["due"]


async def test_a_changed_message_is_sent_as_it_is_now(model: FakeModel) -> None:
    async with openai(model) as client:
        history = CONVERSATION[:5]
        model.script(reply("ok"), reply("ok"))
        await client.complete(history, [])
        edited = [*history[:4], ChatMessage(role="assistant", content="Added it."),
                  ChatMessage(role="user", content="thanks")]
        await client.complete(edited, [])
    assert [m["content"] for m in model.requests[-1].said[-2:]] == ["Added it.", "thanks"]
    assert model.requests[-1].messages[2]["tool_calls"][0]["function"]["arguments"] == '{"title": "milk"}'


def test_the_cache_keeps_to_its_bound_newest_first() -> None:
    cache = WireCache(max_bytes=2_000)
    to_wire = lambda m: {"role": m.role, "content": m.content}  # noqa: E731
    older = [ChatMessage(role="user", content=f"message {i} " + "x" * 90) for i in range(40)]
    cache.messages(older, to_wire)
    assert 0 < cache.cached_bytes <= 2_000
    newest = older[-1]
    cache.messages([newest], to_wire)  # the newest was kept: nothing new is encoded
    before = cache.cached_bytes
    cache.messages([newest], to_wire)
    assert cache.cached_bytes == before
    # images are encoded every time, never kept
    with_image = ChatMessage(role="user", content="see", images=[ImagePart(mime_type="image/png", data="a" * 5_000)])
    assert b"aaaa" in cache.messages([with_image], lambda m: {"i": m.images[0].data})
    assert cache.cached_bytes <= 2_000


def test_system_prompts_take_no_place_from_the_history() -> None:
    """A system prompt is new every turn (it carries the time): cached, a busy resident's prompts pushed the
    history out of the cache, and the history was encoded again and again."""
    cache = WireCache(max_bytes=5_000)
    to_wire = lambda m: {"role": m.role, "content": m.content}  # noqa: E731
    history = [ChatMessage(role="user", content=f"message {i} " + "x" * 40) for i in range(20)]
    cache.messages(history, to_wire)
    held = cache.cached_bytes
    for turn in range(200):  # as many turns, each with its own system prompt
        system = ChatMessage(role="system", content=f"Be brief. It is {turn} o'clock. " + "y" * 500)
        cache.messages([system, *history], to_wire)
    assert cache.cached_bytes == held  # the history's encodings, all of them still there


def test_a_message_cannot_change_under_its_cached_encoding() -> None:
    message = ChatMessage(role="user", content="hello")
    with pytest.raises(ValueError):
        message.content = "changed"  # type: ignore[misc]
    assert message.model_copy(update={"content": "changed"}).content == "changed"  # a new object


def test_a_conversation_s_requests_are_the_bytes_of_their_messages() -> None:
    """Request after request as a conversation makes them (a new system prompt each time, the window
    growing, cut from the front, a tool round within a turn, another conversation in between, an image
    now and then, a message sent twice): each is exactly the JSON of its own messages."""
    client = OpenAIClient("http://127.0.0.1:1/v1", "k", "m", 1.0, 0, 256)
    window: list[ChatMessage] = []
    other = [ChatMessage(role="user", content="another chat")]
    for turn in range(40):
        system = ChatMessage(role="system", content=f"Be brief. It is {turn}:00.")
        window.append(ChatMessage(role="user", content=f"question {turn} ünï",
                                  images=[ImagePart(mime_type="image/png", data="aGk=")] if turn % 13 == 5 else []))
        if turn % 4 == 0:  # a tool round: the same request grows within the turn
            window.append(ChatMessage(role="assistant", content="", tool_calls=[
                ToolCall(id=f"c{turn}", name="task_create", arguments='{"title": "x"}')]))
            window.append(ChatMessage(role="tool", content="Added.", tool_call_id=f"c{turn}", name="task_create"))
        window.append(ChatMessage(role="assistant", content=f"answer {turn}"))
        if len(window) > 6:
            del window[:turn % 3 + 1]  # the budget cuts the oldest
        requests = [[system, *window]]
        if turn % 7 == 3:
            requests.append([system, *other])  # another session's request in between
        if turn % 9 == 4:
            requests.append([system, window[0], *window])  # a message twice
        if turn % 11 == 6:
            requests.append([system, ChatMessage(role="user", content="inserted"), *window[2:]])
        for messages in requests:
            expected = dumps(client.request_body(messages, [], "m"))
            assert client.encoded_body(messages, [], "m", stream=False) == expected
