"""The vector layer of toolset selection (`gateway.selection.vectors`): the shipped table offers a toolset
for a message none of whose words an example request holds, is read on the first selection and not at
start-up, and a missing or corrupt table turns the layer off with a warning while keywords and BM25 go on."""

import json
import logging
import struct
from pathlib import Path

import pytest

from gateway.selection import vectors
from gateway.selection.examples import EXAMPLES
from gateway.selection.meaning import index_for
from gateway.selection.selector import select_toolsets
from gateway.selection.terms import terms
from toolsets.registry import TOOLSETS

ROOT = Path(__file__).parents[1]


def select(text: str):
    return select_toolsets(text, has_attachments=False, recent=[], pins=None, available=TOOLSETS)


@pytest.fixture
def fresh_table(monkeypatch):
    """The module's cached table forgotten for the test (and restored after), so `table()` reads `PATH`."""
    monkeypatch.setattr(vectors, "_table", None)
    monkeypatch.setattr(vectors, "_failed", False)


@pytest.mark.parametrize("text", ["what is the population of brazil", "what's the population of portugal",
                                  "which country has the most islands"])
def test_a_message_whose_words_no_example_holds_is_sent_to_web_by_the_vectors(text):
    written = [*(t for texts in EXAMPLES.values() for t in texts),
               *(json.loads(line)["text"] for line in (ROOT / "bench/selection_train.jsonl").open(encoding="utf-8"))]
    known = {term for example in written for term in terms(example)}
    assert not set(terms(text)) & known  # nothing for keywords' or BM25's examples to match
    selection = select(text)
    assert "web" in selection.names
    assert selection.reasons["web"].startswith("vectors")


@pytest.mark.parametrize("text", ["黄河有多长", "月球离地球有多远"])
def test_a_chinese_question_of_fact_is_sent_to_web_by_the_vectors(text):
    # GloVe has no Chinese: the table's learned character and pair features carry it.
    selection = select(text)
    assert selection.names == ["web"] and selection.reasons["web"].startswith("vectors")


@pytest.mark.parametrize("text", ["explain how a web server works in simple words",
                                  "tell me a story about a lost email"])
def test_a_bm25_match_the_vectors_find_unlikely_is_dropped(text):
    # BM25 matches web on a shared word; the classifier has learnt that such questions need no toolset.
    assert "web" in index_for(TOOLSETS).matches(text, keywords_found=set())
    table = vectors.table()
    assert table is not None and table.doubts("web", table.probabilities(text))
    assert "web" not in select(text).names


def test_small_talk_gets_no_toolset_from_the_vectors():
    for text in ("good morning!", "haha, nice", "nice one, cheers", "see you tomorrow", "hi", "哈哈，好的",
                 "好嘞，知道啦"):
        assert not [r for r in select(text).reasons.values() if r.startswith("vectors")], text


def test_english_is_cut_into_lowercase_words_and_chinese_into_characters_and_pairs():
    assert vectors.english("Sunset in Lisbon, 8:30?") == ["sunset", "in", "lisbon", "8", "30"]
    assert vectors.chinese("今天 wet 下雨吗") == ["今", "天", "今天", "下", "雨", "吗", "下雨", "雨吗"]


def test_the_table_finds_its_tokens_and_nothing_else():
    table = vectors.table()
    assert table is not None
    for token in ("the", "population", "weather", "天气"):  # frequent English, a Chinese pair
        row = table.row(token)
        assert row is not None and len(row) == len(table.classes), token
    for token in ("populationx", "qqqzzz", "", "鿿鿾"):
        assert table.row(token) is None, token


@pytest.mark.parametrize("damage", ["missing", "not a table", "truncated", "bad header", "bad index"])
def test_a_missing_or_corrupt_table_turns_the_layer_off_with_a_warning(damage, tmp_path, monkeypatch,
                                                                       fresh_table, caplog):
    good = vectors.PATH.read_bytes()
    path = tmp_path / "vectors.bin"
    if damage == "not a table":
        path.write_bytes(b"<html>not found</html>")
    elif damage == "truncated":
        path.write_bytes(good[:-100])
    elif damage == "bad header":
        path.write_bytes(good.replace(b'"classes"', b'"klasses"', 1))
    elif damage == "bad index":  # the first hash slot names a token past the last one
        (header_len,) = struct.unpack_from("<I", good, len(vectors.MAGIC))
        slots = len(vectors.MAGIC) + 4 + header_len
        path.write_bytes(good[:slots] + b"\xff\xff\xff\x7f" + good[slots + 4:])
    monkeypatch.setattr(vectors, "PATH", path)
    with caplog.at_level(logging.WARNING, logger="gateway.selection.vectors"):
        population = select("what is the population of brazil")
        email = select("any new email from my boss?")
    assert vectors.table() is None and not vectors.loaded()
    assert "web" not in population.names  # what only the vectors found is gone...
    assert "email" in email.names  # ...keywords and BM25 still select
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "vector layer off" in warnings[0].getMessage()


def test_the_shipped_table_is_what_its_header_says():
    table = vectors.Table(vectors.PATH.read_bytes())
    built_in = {ts.name for ts in TOOLSETS}
    assert table.classes[-1] == vectors.NO_TOOLSET and vectors.NO_TOOLSET not in built_in
    assert set(table.classes[:-1]) <= built_in and {"web", "calendar", "email", "file"} <= set(table.classes)
    assert 0 < table.best_threshold <= table.threshold < 1
    with pytest.raises(vectors.VectorFileError):
        vectors.Table(vectors.PATH.read_bytes() + b"\0")
