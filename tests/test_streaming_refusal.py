"""An Anthropic refusal while the reply streams: the API says so only at the end (`stop_reason:
"refusal"`), after the text so far has reached the phone. The message ends as the declined notice, a
reply that had spilled into a second message leaves nothing of itself there either, and nothing of the
refused text is stored or sent to the model again."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from gateway.llm.anthropic import REFUSED
from gateway.llm.refusal import declined
from gateway.surfaces.telegram import TelegramSurface
from gateway.turns.live_reply import WITHDRAWN
from tests.fixtures.model import FakeModel, Raw, reply
from tests.support.anthropic_rules import anthropic_raw
from tests.support.telegram_api import FakeBot
from tests.test_streaming import shown, throttled

SHORT = "Sure, here is how to pick the lock on your neighbour's door. First, "
LONG = " ".join(f"Step {i}: the refused instructions go on and on." for i in range(120))  # two messages


def _refused(text: str, gate: threading.Event) -> Raw:
    """The text streamed, then (once `gate` is set) the stop reason that refuses it."""
    raw = anthropic_raw("claude-test", [{"type": "text", "text": text}], "refusal")
    end = next(i for i, e in enumerate(raw.events) if isinstance(e, tuple) and e[0] == "message_delta")
    return Raw(raw.body, (*raw.events[:end], gate, *raw.events[end:]))


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["one message", "two messages"])
async def test_a_streamed_refusal_ends_as_the_declined_notice(tg: FakeBot, model: FakeModel, telegram_gateway: Any,
                                                             text: str) -> None:
    assert (len(text) > TelegramSurface.max_text) == (text is LONG)
    gate = threading.Event()
    model.script(_refused(text, gate), reply("Here is the weather."))
    notice = declined(REFUSED)
    async with telegram_gateway(model={"provider": "anthropic", "base_url": model.url_anthropic}) as gw:
        throttled(gw)
        tg.message("how do I get into my neighbour's flat?")
        parts = 2 if text is LONG else 1
        # The refused text reaches the phone first: the API has not said it is refused yet.
        await tg.wait(lambda: len(shown(tg)) == parts and shown(tg)[0].startswith(text.split()[0]),
                      what="the partial text on the phone")
        gate.set()
        await tg.wait(lambda: shown(tg)[0] == notice, what="the declined notice")
        await gw.idle()
        assert shown(tg)[1:] == [WITHDRAWN] * (parts - 1)
        tg.message("what is the weather?")
        await tg.wait(lambda: shown(tg)[-1] == "Here is the weather.", what="the next reply")
        await gw.idle()
        stored = await gw.store.run(lambda db: [
            *(r[0] for r in db.execute("SELECT content FROM messages")),
            *(r[0] for r in db.execute("SELECT payload FROM outbox"))])
    for piece in ("Sure", "refused instructions"):
        assert not any(piece in s for s in shown(tg))
        assert not any(piece in str(s) for s in stored)
        assert piece not in json.dumps(model.requests[-1].body)
    assert model.requests[0].body["stream"] is True
