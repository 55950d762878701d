"""The meaning layer: BM25 over each toolset's description, tool descriptions and example requests.

The keyword scanner (`gateway.selection.keywords`) finds how people usually ask; this finds toolsets
whose documents share the message's rarer words ("is the road closed" shares "road", "closed" with
web's examples). English words are lowercased and trimmed of common endings; Chinese is read as
character bigrams, which need no dictionary. Pure Python, no weights to load: the index of the available
toolsets is built on the first message that needs it (lazily, never at start-up) and cached per set of
toolsets, so a message costs a few dictionary look-ups per word.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from gateway.selection.examples import EXAMPLES
from toolsets.base import Toolset

# BM25's usual constants; documents are short and similar in length, so length matters little.
_K1 = 1.2
_B = 0.5
# Calibrated on the labelled corpus and the first held-out set: any toolset scoring STRONG is offered;
# when the keywords found nothing, the best one is offered from BEST on (the message most likely asks
# for something, and one toolset's schemas cost little).
STRONG = 6.0
BEST = 2.5
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_STOP = frozenset(
    "a an the i me my mine you your we our us he him his she her it its they them their this that these those "
    "is am are was were be been being do does did done have has had can could would should will shall may might "
    "to of in on at for with from by about into over as and or but if so not no yes what which who whom whose "
    "when where why how there here any some all just also too very please thanks ok tell give get got let make "
    "one two s t d ll re ve m".split())
_ENDINGS = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[: -len(end)]
    return word


def terms(text: str) -> list[str]:
    """The index terms of a text: stemmed English words without stop words, Chinese character bigrams
    (a lone character as itself)."""
    out: list[str] = []
    for run in _WORD.findall(text.casefold()):
        if _CJK.match(run):
            out += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
        elif run not in _STOP:
            out.append(_stem(run))
    return out


def _document(ts: Toolset) -> list[str]:
    """A built-in toolset's description, tool descriptions and examples. Another toolset (an MCP
    server's) has its description only: `toolsets.mcp` already decides which of its tool words select
    it (a big, deferred server is selected by none), and its description names its tools when it may."""
    examples = EXAMPLES.get(ts.name)
    if examples is None:
        return terms(ts.description)
    texts = [ts.description, *(t.description for t in ts.tools), *examples]
    return [term for text in texts for term in terms(text)]


class Index:
    """BM25 over one set of toolsets, one document per toolset."""

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        docs = {ts.name: Counter(_document(ts)) for ts in toolsets}
        lengths = {name: sum(c.values()) for name, c in docs.items()}
        average = sum(lengths.values()) / max(len(docs), 1)
        df = Counter(term for c in docs.values() for term in c)
        n = len(docs)
        # Per term, each toolset's precomputed BM25 weight: scoring is then look-ups and additions.
        self.weights: dict[str, dict[str, float]] = {}
        for name, counts in docs.items():
            norm = _K1 * (1 - _B + _B * lengths[name] / max(average, 1))
            for term, tf in counts.items():
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                self.weights.setdefault(term, {})[name] = idf * tf * (_K1 + 1) / (tf + norm)

    def scores(self, text: str) -> dict[str, float]:
        """Each toolset's score for `text` (only those sharing a term)."""
        total: dict[str, float] = {}
        for term in set(terms(text)):
            for name, weight in self.weights.get(term, {}).items():
                total[name] = total.get(name, 0.0) + weight
        return total

    def matches(self, text: str, *, keywords_found: bool) -> dict[str, float]:
        """The toolsets this layer offers for `text`, with their scores: those reaching STRONG, and, when
        the keyword scanner found nothing (`keywords_found` false), the best one from BEST on."""
        scores = self.scores(text)
        chosen = {name: score for name, score in scores.items() if score >= STRONG}
        if scores and not keywords_found:
            best = max(scores, key=lambda name: scores[name])
            if scores[best] >= BEST:
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
