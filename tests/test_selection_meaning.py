"""The meaning layer of toolset selection: BM25 over toolset descriptions and example requests, built
lazily on the first selection, offering toolsets the keywords miss, and nothing for small talk."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.selection import meaning
from gateway.selection.selector import select_toolsets
from gateway.selection.terms import Speller, stem, terms
from toolsets.base import Toolset
from toolsets.registry import TOOLSETS

ROOT = Path(__file__).parents[1]


def pick(text: str, available=TOOLSETS) -> list[str]:
    return select_toolsets(text, has_attachments=False, recent=[], pins=None, available=available).names


@pytest.mark.parametrize("layer", ["meaning", "vectors"])  # the BM25 index; the vector table
def test_importing_the_cli_loads_no_selection_layer_and_the_first_selection_does(layer):
    script = (
        "import gateway.cli.main\n"
        f"from gateway.selection import {layer} as layer\n"
        "from gateway.selection.selector import select_toolsets\n"
        "from toolsets.registry import TOOLSETS\n"
        "print(layer.loaded())\n"
        "select_toolsets('hello', has_attachments=False, recent=[], pins=None, available=TOOLSETS)\n"
        "print(layer.loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_chinese_is_read_as_bigrams_and_english_without_stop_words_or_endings():
    assert terms("路况怎么样") == ["路况", "况怎", "怎么"]  # "么样" (how is it) says nothing of a need
    assert terms("Is the road closed?") == ["road", "clos"]


def test_the_forms_of_a_word_meet_and_chat_shorthand_is_spelled_out():
    assert {stem(w) for w in ("close", "closed", "closes", "closing")} == {"clos"}
    assert {stem(w) for w in ("address", "addresses")} == {"address"}
    assert stem("stopped") == stem("stop") and stem("calls") == "call"
    assert terms("pls chk tmrw") == terms("please chk tomorrow") == ["chk", "tomorrow"]


def test_chinese_particles_and_pronouns_make_no_bigrams():
    """"迪士尼的地址" gives no "尼的" or "的地", bigrams every toolset's examples share by chance."""
    assert terms("迪士尼的地址") == ["迪士", "士尼", "地址"]
    assert terms("你好吗") == ["好"]


def test_a_misspelt_word_is_corrected_to_the_one_document_word_it_is_one_edit_from():
    speller = Speller(["calendar", "reminder", "remind", "shell"])
    assert speller.correct(stem("calender")) == "calendar"  # a letter changed
    assert speller.correct(stem("calnedar")) == "calendar"  # two swapped
    assert speller.correct(stem("reminde")) == "remind"  # a letter too many (here the stemmer drops it)
    assert speller.correct("spell") == "spell"  # too short to guess: "shell" is one edit away
    assert speller.correct("giraffe") == "giraffe"
    index = meaning.index_for(TOOLSETS)
    assert index.scores("whats on my calender") == index.scores("whats on my calendar")


def test_scores_do_not_depend_on_the_hash_seed():
    """Terms are scored in the message's order, so ties between toolsets break the same way in every
    process (a set's order changes with PYTHONHASHSEED)."""
    script = ("from gateway.selection.selector import select_toolsets\n"
              "from toolsets.registry import TOOLSETS\n"
              "for t in ['is the Louvre open on Tuesdays', '红烧肉怎么做',"
              " 'what are the hours of the IKEA on Sunday']:\n"
              "    print(select_toolsets(t, has_attachments=False, recent=[], pins=None, available=TOOLSETS).names)\n")
    outs = {subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(outs) == 1


@pytest.mark.parametrize(("text", "name"), [
    ("what are the opening hours of the town hall", "web"),  # no web keyword names opening hours
    ("路况怎么样，堵车吗", "web"),
])
def test_a_toolset_the_keywords_miss_is_offered_by_meaning(text, name):
    selection = select_toolsets(text, has_attachments=False, recent=[], pins=None, available=TOOLSETS)
    assert name in selection.names
    assert selection.reasons[name].startswith(("meaning", "keyword"))


@pytest.mark.parametrize("text", ["hi", "thanks, that's perfect", "谢谢", "ok"])
def test_small_talk_gets_no_toolset(text):
    assert pick(text) == []


def test_only_available_toolsets_are_offered_and_an_index_is_per_set():
    weather = Toolset("weather", "weather forecast: rain, snow, wind, temperature for a place")
    only = [*(ts for ts in TOOLSETS if ts.name != "web"), weather]
    assert pick("will it rain or snow in Oslo", available=only) == ["weather"]
    assert meaning.index_for(only) is meaning.index_for(list(only))
    assert "web" not in pick("will it rain tomorrow", available=only)


def test_fresh_copies_of_the_same_toolsets_reuse_the_index():
    """The runtime hands selection new Toolset objects each turn; the index (~2 ms to build) is kept."""
    first = [dataclasses.replace(ts) for ts in TOOLSETS]
    again = [dataclasses.replace(ts) for ts in TOOLSETS]
    assert meaning.index_for(first) is meaning.index_for(again)
    renamed = [*again[:-1], dataclasses.replace(again[-1], description="something else entirely")]
    assert meaning.index_for(renamed) is not meaning.index_for(again)


def test_a_long_message_is_scored_by_its_start_and_end_only():
    """Pasted material in the middle of a long message brings no toolset by meaning; the request at
    either end still does (and the layer's cost stays bounded)."""
    filler = "lorem ipsum dolor sit amet " * 80
    index = meaning.index_for(TOOLSETS)
    assert "web" not in index.matches(f"{filler} recipe ingredients bake {filler}", keywords_found=())
    assert "web" in index.matches(f"{filler} recipe ingredients bake", keywords_found=())


def test_thresholds_are_counted_in_distinctive_words():
    """A word only one toolset's document has weighs one "distinctive word": alone it offers that toolset
    when no keyword fired, and never when one did (that takes two and a half)."""
    index = meaning.index_for(TOOLSETS)
    assert index.best < index.strong
    assert index.matches("supermarket", keywords_found=()) == {"web": pytest.approx(index.best)}
    assert index.matches("supermarket", keywords_found={"calendar"}) == {}
