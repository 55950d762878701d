"""The meaning layer: BM25 over each toolset's description and example requests (`examples`).

The keyword scanner (`gateway.selection.keywords`) finds how people usually ask; this finds toolsets
whose documents share the message's rarer words ("is the road closed" shares "road", "closed" with
web's examples). How words become terms (stems, shorthand, Chinese bigrams, typos) is
`gateway.selection.terms`. Pure Python, no weights to load: the index of the available
toolsets is built on the first message that needs it (lazily, never at start-up) and cached per set of
toolsets, so a message costs a few dictionary look-ups per word.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Sequence

from gateway.selection.examples import EXAMPLES
from gateway.selection.terms import Speller, terms
from toolsets.base import Toolset

# BM25's k1; no length normalisation (b = 0): a toolset with more example requests is not a worse match
# for a word it has, and the examples are what carries the evidence.
_K1 = 1.2
# Thresholds in units of one "distinctive word", the weight of a term that only one toolset's document
# holds (the idf of document frequency 1; about 2.6 with 19 toolsets): the best toolset is offered from
# one such word on when the keywords found nothing (the message most likely asks for something, and one
# toolset's schemas cost little); any toolset from two and a half on, whatever the keywords found. The
# half was chosen on the corpus and the two earlier held-out sets (2 gave 0.35 wrong picks per corpus
# message, 2.5 gives 0.26, 3 costs recall), never on `bench/selection_unseen2.jsonl`.
BEST_WORDS = 1.0
STRONG_WORDS = 2.5


def _document(ts: Toolset) -> list[str]:
    """A toolset's description and, for a built-in one, its example requests. Tool descriptions are left
    out: they speak of arguments and mechanics ("long-term", "range", "version"), words that matched
    unrelated messages. An MCP server's toolset has its description only: `toolsets.mcp` already decides
    which of its tool words select it (a big, deferred server is selected by none)."""
    examples = EXAMPLES.get(ts.name, ())
    return [term for text in (ts.description, *examples) for term in terms(text)]


# A request to the assistant is a phrase at a long message's start or end (the rest is pasted material,
# whose words would point everywhere); scoring only those bounds the layer's cost per message.
EDGE_CHARS = 300


def _edges(text: str) -> str:
    return text if len(text) <= 2 * EDGE_CHARS else f"{text[:EDGE_CHARS]}\n{text[-EDGE_CHARS:]}"


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


class Index:
    """BM25 over one set of toolsets, one document per toolset."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        docs = {ts.name: Counter(_document(ts)) for ts in toolsets}
        df = Counter(term for c in docs.values() for term in c)
        n = len(docs)
        distinctive = _idf(n, 1)
        self.best = BEST_WORDS * distinctive
        self.strong = STRONG_WORDS * distinctive
        # Per term, each toolset's precomputed BM25 weight: scoring is then look-ups and additions.
        self.weights: dict[str, dict[str, float]] = {}
        self.speller = Speller(df)
        for name, counts in docs.items():
            for term, tf in counts.items():
                self.weights.setdefault(term, {})[name] = _idf(n, df[term]) * tf * (_K1 + 1) / (tf + _K1)

    def scores(self, text: str) -> dict[str, float]:
        """Each toolset's score for `text` (only those sharing a term)."""
        total: dict[str, float] = {}
        # In the message's order (not a set's, which varies with hash seeds): ties then break the same way.
        for term in dict.fromkeys(self.speller.correct(term) for term in terms(text)):
            for name, weight in self.weights.get(term, {}).items():
                total[name] = total.get(name, 0.0) + weight
        return total

    def matches(self, text: str, *, keywords_found: Collection[str]) -> dict[str, float]:
        """The toolsets this layer offers for `text`, with their scores: those reaching `strong`, and, when
        the keyword scanner found none (`keywords_found`, the toolsets it found, is empty), the best one
        from `best` on."""
        scores = self.scores(_edges(text))
        chosen = {name: score for name, score in scores.items() if score >= self.strong}
        if scores:
            best = max(scores, key=lambda name: scores[name])
            if scores[best] >= self.best and not keywords_found:
                chosen[best] = scores[best]
        return chosen


# Indexes by what their documents are made of. The runtime hands selection fresh Toolset objects each
# turn (filtered per user), so an identity key rebuilt the index (~2 ms) on every message. A built-in
# toolset's document is fixed by its name; an MCP toolset's is its description, and its tools' names
# change with a server's refresh. A runtime has a few sets: owners', guests', MCP's.
_MAX_INDEXES = 8
_indexes: dict[tuple[tuple[str, str, tuple[str, ...]], ...], Index] = {}


def index_for(toolsets: Sequence[Toolset]) -> Index:
    """The index of these toolsets, built on first use."""
    key = tuple((ts.name, ts.description, tuple(t.name for t in ts.tools)) for ts in toolsets)
    index = _indexes.get(key)
    if index is None:
        if len(_indexes) >= _MAX_INDEXES:
            _indexes.pop(next(iter(_indexes)))
        index = _indexes[key] = Index(toolsets)
    return index


def loaded() -> bool:
    """Whether any index has been built yet (start-up builds none)."""
    return bool(_indexes)
