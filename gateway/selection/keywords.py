"""Fast matching of toolset keywords (case-insensitive regular expressions) against a message.

Python's `re` scans a pattern position by position, and keyword patterns that start with `\\b`, a group
or a cased letter under IGNORECASE get none of its fast-skip optimizations: a plain alternation of ~20
keywords costs about half a microsecond per character of message, per toolset. So each keyword is
gated by literal "needles": strings one of which every match must contain, read from the pattern's text
by `needles_of` (a small scanner of the regex syntax keywords use: literals, escapes, classes, groups,
alternation, lookarounds, quantifiers). A plain substring test on the casefolded message rules a keyword
out; only keywords whose needle occurs run their regex. A keyword the scanner does not understand, or
without a usable needle, simply always runs, so any regex is accepted and the regex stays the single
source of truth.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

# Shorter needles (" ", "to") occur in nearly every message and would gate nothing.
_MIN_NEEDLE_BYTES = 3
UNBOUNDED = 1 << 30  # the width of a pattern with an open-ended repeat
_ZERO_WIDTH_ESCAPES = set("bBAZ")
_CLASS_ESCAPES = set("dDwWsS")
_QUANTIFIER = re.compile(r"\?|\*|\+|\{(\d*)(?:(,)(\d*))?\}")
_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
# Plain characters, taken a run at a time: one atom call per character made the scan of the ~430
# registered keywords ~9 ms of the first message.
_LITERAL_RUN = re.compile(r"[^\\\[\].^$()|*+?{]+")


class _Unsupported(Exception):
    """Syntax the scanner does not follow; the keyword then runs ungated."""


Needles = frozenset[str] | None


def _strength(needles: frozenset[str]) -> int:
    return min(len(n.encode()) for n in needles)


def _better(best: Needles, candidate: Needles) -> Needles:
    """The stronger needle set (the one whose shortest member is longest); empty strings never count."""
    if candidate and all(candidate) and (best is None or _strength(candidate) > _strength(best)):
        return candidate
    return best


class _Scanner:
    """Recursive descent over a pattern's text, computing for each part the needles every match of it
    contains (casefolded) and its greatest width."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0

    def parse(self) -> tuple[Needles, int]:
        result = self._alternation()
        if self.pos != len(self.src):
            raise _Unsupported(self.src)
        return result

    def _peek(self) -> str:
        return self.src[self.pos] if self.pos < len(self.src) else ""

    def _alternation(self) -> tuple[Needles, int]:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.pos += 1
            branches.append(self._sequence())
        if len(branches) == 1:
            return branches[0]
        width = max(w for _, w in branches)
        if all(n for n, _ in branches):
            return frozenset().union(*(n for n, _ in branches if n)), width
        return None, width

    def _sequence(self) -> tuple[Needles, int]:
        best: Needles = None
        run: list[str] = []
        width = 0
        while self._peek() not in ("", "|", ")"):
            literal = _LITERAL_RUN.match(self.src, self.pos)
            if literal:
                text = literal.group(0)
                if self.src.startswith(("?", "*", "+", "{"), literal.end()):
                    text = text[:-1]  # the last character is the one the quantifier repeats
                if text:
                    self.pos += len(text)
                    run.append(text)
                    width = min(UNBOUNDED, width + len(text))
                    continue
            kind, needles, atom_width = self._atom()
            low, high = self._quantifier()
            width = min(UNBOUNDED, width + atom_width * high)
            if kind == "zero":
                continue  # consumes nothing, so the literal run around it is contiguous text
            if kind == "literal" and (low, high) == (1, 1):
                run.append(needles)  # type: ignore[arg-type]  # a literal atom carries its character
                continue
            best = _better(best, frozenset({"".join(run).casefold()}))
            run = []
            if low >= 1 and kind == "group":
                best = _better(best, needles)  # type: ignore[arg-type]
        return _better(best, frozenset({"".join(run).casefold()})), width

    def _quantifier(self) -> tuple[int, int]:
        m = _QUANTIFIER.match(self.src, self.pos)
        if not m:
            return 1, 1
        self.pos = m.end()
        if self._peek() in ("?", "+"):  # lazy or possessive: the same bounds
            self.pos += 1
        text = m.group(0)
        if text == "?":
            return 0, 1
        if text == "*":
            return 0, UNBOUNDED
        if text == "+":
            return 1, UNBOUNDED
        low = int(m.group(1) or 0)
        if not m.group(2):
            return low, low
        return low, int(m.group(3)) if m.group(3) else UNBOUNDED

    def _atom(self) -> tuple[str, object, int]:
        """("literal", char, 1), ("class", None, 1), ("zero", None, 0) or ("group", needles, width)."""
        ch = self._peek()
        self.pos += 1
        if ch == "\\":
            return self._escape()
        if ch == "[":
            self._skip_class()
            return "class", None, 1
        if ch == ".":
            return "class", None, 1
        if ch in "^$":
            return "zero", None, 0
        if ch == "(":
            return self._group()
        if ch in "*+?{":
            raise _Unsupported(self.src)
        return "literal", ch, 1

    def _escape(self) -> tuple[str, object, int]:
        ch = self._peek()
        if not ch:
            raise _Unsupported(self.src)
        self.pos += 1
        if ch in _ZERO_WIDTH_ESCAPES:
            return "zero", None, 0
        if ch in _CLASS_ESCAPES:
            return "class", None, 1
        if ch in _CONTROL_ESCAPES:
            return "literal", _CONTROL_ESCAPES[ch], 1
        if ch.isalnum():  # \x, \u, back-references, \N{...}: not worth following
            raise _Unsupported(self.src)
        return "literal", ch, 1

    def _skip_class(self) -> None:
        if self._peek() == "^":
            self.pos += 1
        if self._peek() == "]":
            self.pos += 1  # a leading "]" is a member
        while self._peek() != "]":
            if not self._peek():
                raise _Unsupported(self.src)
            self.pos += 2 if self._peek() == "\\" else 1
        self.pos += 1

    def _group(self) -> tuple[str, object, int]:
        if self.src.startswith("?", self.pos):
            kinds = {"?:": "group", "?=": "zero", "?!": "zero", "?<=": "zero", "?<!": "zero"}
            opener = next((o for o in kinds if self.src.startswith(o, self.pos)), None)
            if opener is None:
                raise _Unsupported(self.src)  # flags, named groups, conditionals
            self.pos += len(opener)
            kind = kinds[opener]
        else:
            kind = "group"
        needles, width = self._alternation()
        if self._peek() != ")":
            raise _Unsupported(self.src)
        self.pos += 1
        return (kind, needles, width) if kind == "group" else ("zero", None, 0)


def needles_of(source: str) -> tuple[Needles, int]:
    """The needles (casefolded) one of which every match of the pattern `source` contains, choosing
    the set whose shortest member is longest, and the pattern's greatest width; (None, UNBOUNDED) when
    the scanner does not follow its syntax."""
    try:
        return _Scanner(source).parse()
    except _Unsupported:
        return None, UNBOUNDED


class KeywordMatcher:
    """One toolset's keywords, indexed by needle. A keyword's regex is compiled the first time its
    needle occurs in a message: compiling all ~430 of them took ~20 ms of the first reply."""

    def __init__(self, keywords: Sequence[str]) -> None:
        self._always: list[str] = []
        self._by_needle: dict[str, list[tuple[str, int]]] = {}
        self._compiled: dict[str, re.Pattern[str]] = {}
        for source in keywords:
            needles, width = needles_of(source)
            if needles is None or _strength(needles) < _MIN_NEEDLE_BYTES:
                self._always.append(source)
                continue
            for needle in sorted(needles):
                self._by_needle.setdefault(needle, []).append((source, width))

    def search(self, text: str, folded: str) -> re.Match[str] | None:
        """A keyword match in `text`, or None; `folded` must be `text.casefold()` (computed once per
        message by the caller and shared by every toolset). Deterministic for a given text."""
        # Every match contains a needle, so it starts at most its pattern's width before the needle's
        # first occurrence. Offsets only carry over when casefolding kept the length (not for "ß").
        aligned = len(folded) == len(text)
        starts: dict[str, int] = dict.fromkeys(self._always, 0)
        for needle, entries in self._by_needle.items():
            at = folded.find(needle)
            if at < 0:
                continue
            for source, width in entries:
                start = max(0, at - width) if aligned else 0
                starts[source] = min(start, starts.get(source, start))
        for source, start in starts.items():
            match = self._pattern(source).search(text, start)
            if match:
                return match
        return None

    def _pattern(self, source: str) -> re.Pattern[str]:
        pattern = self._compiled.get(source)
        if pattern is None:
            pattern = self._compiled[source] = re.compile(source, re.IGNORECASE)
        return pattern


@cache  # one entry per toolset's keyword tuple
def matcher(keywords: tuple[str, ...]) -> KeywordMatcher:
    """The compiled matcher for a toolset's keywords."""
    return KeywordMatcher(keywords)
