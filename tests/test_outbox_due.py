"""The dispatcher's query (`Outbox.due_except`): rows still in lanes are not handed over again unless
rewritten, and the first new message of each idle chat is marked as being sent in the same call."""

import pytest

from store.outbox import Outbox
from store.records import Origin, Outbound

pytestmark = pytest.mark.both_backends


def out(chat: str, text: str, edit_of: int | None = None) -> Outbound:
    return Outbound(origin=Origin(surface="telegram", chat_id=chat), text=text, edit_of_outbox_id=edit_of)


async def sending(store, ids: list[int]) -> list[bool]:
    box = Outbox(store)
    return [(await box.get(i)).in_doubt for i in ids]


async def test_rows_in_lanes_come_back_only_when_rewritten(store):
    box = Outbox(store)
    a = await box.put(out("1", "a"), "ka")
    b = await box.put(out("2", "b"), "kb")
    due = await box.due_except("telegram", 10, {a: 0, b: 0})
    assert (due.items, due.read) == ([], 2)  # both read, neither parsed nor handed over again
    await box.put(out("1", "a, rewritten"), "ka")
    due = await box.due_except("telegram", 10, {a: 0, b: 0})
    assert [(i.id, i.revision) for i in due.items] == [(a, 1)]
    assert due.sending == set()  # a row in a lane is never marked by the query


async def test_the_first_new_message_of_each_idle_chat_is_marked_sending(store):
    box = Outbox(store)
    first = await box.put(out("1", "first"), "k1")
    second = await box.put(out("1", "second"), "k2")
    edit = await box.put(out("2", "edit", edit_of=first), "k3")
    busy = await box.put(out("3", "behind a busy lane"), "k4")
    assert (await box.due("telegram"))[0].id == first and await sending(store, [first]) == [False]  # due marks nothing
    due = await box.due_except("telegram", 10, {}, frozenset({"3"}))
    assert [i.id for i in due.items] == [first, second, edit, busy]
    assert due.sending == {first}
    assert await sending(store, [first, second, edit, busy]) == [True, False, False, False]
