"""Index terms for the meaning layer: how a message's words are made comparable with the documents'.

English: lowercased, chat shorthand spelled out ("tmrw" → "tomorrow"), stop words dropped, and a light
stemmer so the forms of one word meet ("close", "closed", "closes", "closing" → "clos"). Chinese: runs
of characters split at particles and pronouns (的, 吗, 我, 你…), which carry no request, then read as
character bigrams (a lone character as itself), which need no dictionary. Misspellings are corrected by
`Speller`, against the words of the documents only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"[a-z0-9]+(?:/o)?|[\u3400-\u9fff]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_STOP = frozenset(
    [
        "a", "an", "the", "i", "me", "my", "mine", "you", "your", "we", "our", "us", "he", "him", "his", "she", "her",
        "it", "its", "they", "them", "their", "this", "that", "these", "those", "is", "am", "are", "was", "were", "be",
        "been", "being", "do", "does", "did", "done", "have", "has", "had", "can", "could", "would", "should", "will",
        "shall", "may", "might", "to", "of", "in", "on", "at", "for", "with", "from", "by", "about", "into", "over",
        "as", "and", "or", "but", "if", "so", "not", "no", "yes", "what", "which", "who", "whom", "whose", "when",
        "where", "why", "how", "there", "here", "any", "some", "all", "just", "also", "too", "very", "please", "thanks",
        "ok", "tell", "give", "get", "got", "let", "make", "one", "two", "s", "t", "d", "ll", "re", "ve", "m",
    ]
)
# Chinese characters that only glue a sentence together (particles, pronouns): a bigram across them
# ("的地" in "迪士尼的地址") is noise shared by every toolset.
_CJK_GLUE = re.compile("[的了吗呢吧啊呀嘛哦我你您他她它们这那个是]+")
_CJK_STOP = frozenset({"什么", "一下", "么样"})
# Shorthand of typed chat, spelled out so it meets the documents' words. Generic (texting
# abbreviations), not taken from any labelled set.
SHORTHAND: dict[str, str] = {
    "u": "you", "ur": "your", "r": "are", "y": "why", "n": "and", "pls": "please", "plz": "please",
    "rn": "right now", "atm": "at the moment", "asap": "soon", "tmrw": "tomorrow", "tmr": "tomorrow",
    "tmrow": "tomorrow", "tomo": "tomorrow", "2moro": "tomorrow", "2day": "today", "tdy": "today",
    "tonite": "tonight", "2nite": "tonight", "wknd": "weekend", "mon": "monday", "tue": "tuesday",
    "tues": "tuesday", "wed": "wednesday", "weds": "wednesday", "thu": "thursday", "thur": "thursday",
    "thurs": "thursday", "fri": "friday", "b4": "before",
    "abt": "about", "bc": "because", "cuz": "because", "w": "with", "w/o": "without", "msg": "message",
    "msgs": "messages", "txt": "text", "pic": "picture", "pics": "pictures", "vid": "video",
    "appt": "appointment", "mtg": "meeting", "cal": "calendar", "bday": "birthday",
    "hrs": "hours", "min": "minute", "mins": "minutes", "sec": "second", "nr": "number", "num": "number",
    "addr": "address", "ppl": "people", "pwd": "password", "convo": "conversation", "info": "information",
    "thx": "thanks", "ty": "thanks", "sth": "something", "smth": "something", "wat": "what",
    "wats": "what", "whats": "what", "hw": "how", "hows": "how", "whens": "when", "wheres": "where",
    "im": "i am", "ive": "i have", "dont": "do not", "cant": "can not", "wanna": "want", "gonna": "going",
    "gotta": "must",
}
_ENDINGS = ("ing", "ed", "es", "s")
_NO_UNDOUBLING = frozenset("lsz")  # "calls", "pass", "buzz" keep their double letter


def stem(word: str) -> str:
    """A light English stemmer: one inflection off, a doubled consonant it left undone ("stopped" →
    "stop"), then a final e ("close" and "closed" both become "clos")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= 3 and not (end == "s" and word.endswith("ss")):
            word = word[: -len(end)]
            if end in ("ing", "ed") and word[-1] == word[-2] and word[-1] not in _NO_UNDOUBLING:
                word = word[:-1]
            break
    if len(word) >= 4 and word.endswith("e"):
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """The English words and Chinese runs of a text, casefolded, shorthand spelled out."""
    out: list[str] = []
    for run in _WORD.findall(text.casefold()):
        out += SHORTHAND[run].split() if run in SHORTHAND else [run]
    return out


def chinese_terms(run: str) -> list[str]:
    """Bigrams of a run of Chinese characters, split at glue characters first."""
    out: list[str] = []
    for part in _CJK_GLUE.split(run):
        if len(part) == 1:
            out.append(part)
        else:
            out += [b for b in (part[i:i + 2] for i in range(len(part) - 1)) if b not in _CJK_STOP]
    return out


def english_terms(items: Iterable[str]) -> list[str]:
    """Stems of the English words among `items`, without stop words."""
    return [stem(w) for w in items if w not in _STOP and not _CJK.match(w)]


def terms(text: str) -> list[str]:
    """The index terms of a text: stemmed English words without stop words, Chinese bigrams."""
    out: list[str] = []
    for w in words(text):
        if _CJK.match(w):
            out += chinese_terms(w)
        elif w not in _STOP:
            out.append(stem(w))
    return out


class Speller:
    """Corrects a misspelt English stem to the one document stem it is one edit from (a letter missing,
    extra, changed, or two swapped), by the delete-one neighbourhoods of both (as SymSpell does). Only
    stems of MIN_LENGTH letters or more: short words have too many neighbours ("spell", "shell")."""

    MIN_LENGTH = 6

    def __init__(self, vocabulary: Iterable[str]) -> None:
        self.vocabulary = frozenset(vocabulary)
        # Each delete-one variant to the stem it comes from, or to "" when several do: plain strings, not
        # sets, as thousands of small containers made the build slow (garbage-collector passes).
        self._near: dict[str, str] = {}
        for known in self.vocabulary:
            if len(known) >= self.MIN_LENGTH - 1 and known.isalpha():
                for variant in {known, *_deletes(known)}:
                    self._near[variant] = known if self._near.get(variant, known) == known else ""

    def correct(self, term: str) -> str:
        """`term` if it is known, too short or not a word; else its only near document stem, if any."""
        if term in self.vocabulary or len(term) < self.MIN_LENGTH or not term.isalpha():
            return term
        candidates = {self._near[v] for v in (term, *_deletes(term)) if v in self._near}
        return candidates.pop() if len(candidates) == 1 and "" not in candidates else term


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}
