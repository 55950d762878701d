"""A search term is literal text on both backends: `%`, `_` and `\\` in it match themselves, never "any
characters" (SQLite's LIKE fallback for short terms, PostgreSQL's ILIKE for every term)."""

import pytest

from store.messages import Messages
from store.records import MessageRecord, Origin
from store.sessions import Sessions

pytestmark = pytest.mark.both_backends

TEXTS = ["50% off today", "50 apples", "file_name.txt", "filexname.txt", "a\\b path", "ab path"]


@pytest.fixture
async def found(store):  # type: ignore[no-untyped-def]
    await Sessions(store).get_or_create("console:c", Origin(surface="console", chat_id="c"), "console:me")
    messages = Messages(store)
    ids = {}
    for text in TEXTS:
        ids[await messages.add(MessageRecord(session_id="console:c", turn_id="t", role="user", content=text,
                                             user_key="console:me"))] = text

    async def search(term: str) -> set[str]:
        return {ids[h.message_id] for h in await messages.search("console:me", term, limit=20)}

    return search


@pytest.mark.parametrize("term, texts", [
    ("%", {"50% off today"}),
    ("0%", {"50% off today"}),
    ("50%", {"50% off today"}),  # 3 characters: the full-text path on SQLite
    ("_", {"file_name.txt"}),
    ("e_n", {"file_name.txt"}),
    ("e_name", {"file_name.txt"}),
    ("\\", {"a\\b path"}),
    ("a\\b", {"a\\b path"}),
    ("%_%", set()),
])
async def test_wildcards_in_a_term_match_themselves(found, term: str, texts: set[str]) -> None:  # type: ignore[no-untyped-def]
    assert await found(term) == texts
