"""What a Telegram turn writes, transaction by transaction: the real Gateway on the fake Bot API and the
fake model, with SQLite's own statement trace on the store's connection.

A streamed reply's final write carries the model's answer and the inbound marked done in the transaction
of its last outbox row: recorded all together, once the whole reply is (gateway/turns/live_reply.py)."""

from __future__ import annotations

from typing import Any

from gateway.app import Gateway
from tests.fixtures.model import FakeModel, reply
from tests.support.model_stream import Pace
from tests.support.telegram_api import FakeBot
from tests.test_streaming import WORDS, shown, throttled, words


async def _traced(gw: Gateway) -> list[str]:
    """Every statement the store runs from now on, as SQLite reports it."""
    statements: list[str] = []
    await gw.store.run(lambda db: db.conn.set_trace_callback(statements.append))
    return statements


def transactions(statements: list[str]) -> list[list[str]]:
    """The statements grouped by explicit transaction (BEGIN ... COMMIT)."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for sql in statements:
        if sql.startswith("BEGIN"):
            current = []
        elif sql == "COMMIT" and current is not None:
            groups.append(current)
            current = None
        elif current is not None:
            current.append(sql)
    return groups


def _the_end(statements: list[str]) -> list[str]:
    """The transaction that marked the inbound done (there must be exactly one)."""
    [end] = [t for t in transactions(statements) if any("SET state = 'done'" in s for s in t)]
    return end


async def test_a_short_reply_records_answer_row_and_done_together(tg: FakeBot, model: FakeModel,
                                                                  telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        statements = await _traced(gw)
        tg.message("hi")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    assert shown(tg) == ["echo: hi"]
    end = _the_end(statements)
    assert any(s.startswith("INSERT INTO messages") and "'assistant'" in s for s in end)
    assert any("outbox" in s for s in end)
    # Nothing of the turn's end left outside it: no autocommitted "done", no separate answer insert.
    done = [s for s in statements if "inbound_queue SET state = 'done'" in s]
    answers = [s for s in statements if s.startswith("INSERT INTO messages") and "'assistant'" in s]
    assert len(done) == 1 and len(answers) == 1


async def test_a_reply_in_two_messages_is_recorded_with_its_last_row(tg: FakeBot, model: FakeModel,
                                                                      telegram_gateway: Any) -> None:
    text = "\n\n".join(f"Paragraph {i}. " + WORDS * 3 for i in range(12))  # two Telegram messages
    model.pace = Pace()  # whole before the first write: the final write sends both parts
    model.script(reply(text))
    async with telegram_gateway() as gw:
        throttled(gw)
        statements = await _traced(gw)
        tg.message("write a lot")
        await tg.wait(lambda: len(shown(tg)) == 2 and words("\n".join(shown(tg))) == words(text), timeout=15,
                      what="two final messages")
        await gw.idle()
    end = _the_end(statements)
    keys = [s for s in end if "outbox" in s and ":reply" in s]
    assert keys and all(":reply:2" in s for s in keys), end  # the second (last) part, not the first
    assert any(s.startswith("INSERT INTO messages") and "'assistant'" in s for s in end)
