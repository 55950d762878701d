"""The transcript's search index is filled in batches (store/search_index.py): a search still finds every
message, and rows changed or deleted before or after they were indexed leave the index consistent."""

from store.messages import Messages
from store.records import MessageRecord, Origin
from store.sessions import Sessions


async def add(messages: Messages, text: str) -> int:
    return await messages.add(MessageRecord(session_id="console:c", turn_id="t", role="user", content=text,
                                            user_key="console:me"))


async def found(messages: Messages, term: str) -> list[int]:
    return [h.message_id for h in await messages.search("console:me", term)]


async def integrity(messages: Messages) -> None:
    """FTS5's own check that the index matches the messages table (once it has caught up)."""
    await messages.catch_up()
    await messages.store.run(lambda db: db.execute(
        "INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)"))


async def test_new_rows_wait_for_a_batch_and_a_search_still_sees_them(store):
    await Sessions(store).get_or_create("console:c", Origin(surface="console", chat_id="c"), "console:me")
    messages = Messages(store)
    first = await add(messages, "the dentist is on tuesday")
    indexed = await store.run(lambda db: db.execute(
        "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '\"dentist\"'").fetchone()[0])
    assert indexed == 0  # not indexed by the insert ...
    assert await found(messages, "dentist") == [first]  # ... but a search catches up first
    later = await add(messages, "the plumber comes on friday")
    gone = await add(messages, "the plumber was cancelled")
    await store.run(lambda db: db.execute("DELETE FROM messages WHERE id = ?", [gone]))  # never indexed
    await store.run(lambda db: db.execute("UPDATE messages SET content = 'the dentist moved to monday' WHERE id = ?",
                                          [first]))  # indexed: the index follows the change
    await integrity(messages)
    assert await found(messages, "plumber") == [later]
    assert await found(messages, "monday") == [first]
    assert await found(messages, "tuesday") == []
    await integrity(messages)
