"""Fast matching of toolset keywords (case-insensitive regular expressions) against a message.

Python's `re` scans a pattern position by position, and keyword patterns that start with `\\b`, a group
or a cased letter under IGNORECASE get none of its fast-skip optimizations: a plain alternation of ~20
keywords costs about half a microsecond per character of message, per toolset. So each keyword is
gated by literal "needles": strings (found by walking the parsed pattern) one of which every match must
contain. A plain substring test on the casefolded message rules a keyword out; only keywords whose
needle occurs run their regex. Keywords without a usable needle simply always run, so any regex is
accepted and the regex stays the single source of truth.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from re import _constants as sre  # the parsed-pattern opcodes; re offers no public API for them
from re import _parser
from typing import Any

# Shorter needles (" ", "to") occur in nearly every message and would gate nothing.
_MIN_NEEDLE_BYTES = 3
_ZERO_WIDTH = (sre.AT, sre.ASSERT, sre.ASSERT_NOT)


def _strength(needles: frozenset[str]) -> int:
    return min(len(n.encode()) for n in needles)


def _needles(items: Iterable[tuple[Any, Any]]) -> frozenset[str] | None:
    """Strings one of which every match of the parsed sequence `items` contains (casefolded), choosing
    the set whose shortest member is longest; None when nothing is required."""
    best: frozenset[str] | None = None
    run: list[str] = []

    def consider(candidate: frozenset[str] | None) -> None:
        nonlocal best
        if candidate and all(candidate) and (best is None or _strength(candidate) > _strength(best)):
            best = candidate

    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        if op in _ZERO_WIDTH:
            continue  # consumes nothing, so the literal run around it is contiguous text
        consider(frozenset({"".join(run).casefold()}))
        run = []
        if op is sre.SUBPATTERN:
            consider(_needles(av[-1]))
        elif op is sre.BRANCH:
            alternatives = [_needles(alt) for alt in av[1]]
            if all(alternatives):
                consider(frozenset().union(*alternatives))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1:
            consider(_needles(av[2]))
    consider(frozenset({"".join(run).casefold()}))
    return best


class KeywordMatcher:
    """One toolset's keywords, compiled once and indexed by needle."""

    def __init__(self, keywords: Sequence[str]) -> None:
        self._always: list[re.Pattern[str]] = []
        self._by_needle: dict[str, list[tuple[re.Pattern[str], int]]] = {}
        for source in keywords:
            parsed = _parser.parse(source)
            pattern = re.compile(source, re.IGNORECASE)
            needles = _needles(parsed)
            if needles is None or _strength(needles) < _MIN_NEEDLE_BYTES:
                self._always.append(pattern)
                continue
            for needle in sorted(needles):
                self._by_needle.setdefault(needle, []).append((pattern, parsed.getwidth()[1]))

    def search(self, text: str, folded: str) -> re.Match[str] | None:
        """A keyword match in `text`, or None; `folded` must be `text.casefold()` (computed once per
        message by the caller and shared by every toolset). Deterministic for a given text."""
        # Every match contains a needle, so it starts at most its pattern's width before the needle's
        # first occurrence. Offsets only carry over when casefolding kept the length (not for "ß").
        aligned = len(folded) == len(text)
        starts: dict[re.Pattern[str], int] = dict.fromkeys(self._always, 0)
        for needle, entries in self._by_needle.items():
            at = folded.find(needle)
            if at < 0:
                continue
            for pattern, width in entries:
                start = max(0, at - width) if aligned else 0
                starts[pattern] = min(start, starts.get(pattern, start))
        for pattern, start in starts.items():
            match = pattern.search(text, start)
            if match:
                return match
        return None


@lru_cache(maxsize=None)  # one entry per toolset's keyword tuple
def matcher(keywords: tuple[str, ...]) -> KeywordMatcher:
    """The compiled matcher for a toolset's keywords."""
    return KeywordMatcher(keywords)
