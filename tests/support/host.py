"""Helpers for the host-tool tests that run through a real console gateway: a tool call scripted on the
fake model, the tool result the model got back, the approvals held."""

from __future__ import annotations

from typing import Any

from store.approvals import Approvals
from tests.fixtures.model import reply, tool_call


def tool_result(model: Any) -> str:
    """The newest tool result the model was sent."""
    for req in reversed(model.requests):
        for m in reversed(req.messages):
            if m["role"] == "tool":
                return m["content"]
    raise AssertionError("no tool result was sent to the model")


async def call(harness: Any, model: Any, name: str, args: dict[str, Any],
               text: str = "please use the file or run the command") -> str:
    """One scripted call of `name` in a console turn; the result the model saw."""
    model.script(tool_call(name, args), reply("ok"))
    await harness.say(text)
    return tool_result(model)


async def pending(harness: Any) -> list[Any]:
    return await Approvals(harness.gw.store).list(("pending",))
