"""The vector layer: a linear classifier over static word embeddings and learned word and character
features, for messages whose words no keyword and no example request holds ("what is the population of
brazil").

`vectors.bin` (package data, built offline by `bench/build_word_vectors.py` from GloVe 6B 50d word
vectors; provenance and licence in `VECTORS.md` beside it) holds, for each token, that token's int8
contribution to each built-in toolset's score (and to "no toolset"). A token is an English word (the
most frequent words of GloVe's vocabulary, and words of the training requests) or a Chinese character or
character pair seen in the training requests. The classifier is linear in the mean of a message's English
words' features (the word's GloVe vector and its learned weights) and in its Chinese characters and pairs
counted and divided by the length of that count vector, so a message's score for a class is the mean of
its English tokens' contributions plus the normalised sum of its Chinese ones: run time needs neither the
embeddings nor numpy. Pure Python.

The file is one bytes object: the header, an open-addressing hash table of the tokens (`zlib.crc32` of
their UTF-8), the tokens' offsets into one blob of their UTF-8, the blob, the rows. A lookup hashes the
key and compares a few slices, so the vocabulary costs no Python object per token.

The table is read on the first message that needs it (never at start-up). A missing or corrupt file
turns this layer off with one logged warning; keywords and BM25 go on selecting.
"""

from __future__ import annotations

import json
import logging
import math
import re
import struct
import zlib
from collections import Counter
from collections.abc import Collection
from operator import add
from pathlib import Path

log = logging.getLogger(__name__)

PATH = Path(__file__).with_name("vectors.bin")
MAGIC = b"ANYYVEC2"
# A message's request sits at its start or end; scoring only those bounds the cost (as `meaning` does;
# fewer characters here, as a pasted text's words would drown the request in the mean anyway).
EDGE_CHARS = 200
# The class of messages that need no toolset (small talk), beside the toolsets' in the table.
NO_TOOLSET = "(none)"
_WORD = re.compile(r"[a-z0-9]+")
_HAN_RUN = re.compile(r"[\u3400-\u9fff]+")


class VectorFileError(ValueError):
    """The vector file is missing, truncated or not in the expected format."""


def english(text: str) -> list[str]:
    """The lowercase words of `text` (letters and digits), as the table's English tokens are spelt."""
    return _WORD.findall(text.casefold())


def chinese(text: str) -> list[str]:
    """The Chinese characters of `text` and the pairs of neighbouring ones within a run of them."""
    out: list[str] = []
    for run in _HAN_RUN.findall(text):
        out.extend(run)
        out.extend(run[i:i + 2] for i in range(len(run) - 1))
    return out


def slot_of(key: bytes, slots: int) -> int:
    """A key's first slot in a hash table of `slots` slots (a power of two); the build uses it too."""
    return zlib.crc32(key) & (slots - 1)


class Table:
    """Per-token score contributions for a fixed list of classes (`classes`), int8-quantised."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
            raise VectorFileError("not a vector file (bad magic)")
        (header_len,) = struct.unpack_from("<I", data, len(MAGIC))
        start = len(MAGIC) + 4
        try:
            header = json.loads(data[start:start + header_len])
            self.classes: list[str] = list(header["classes"])
            self.bias: list[float] = [float(b) for b in header["bias"]]
            self.english_scale = float(header["english_scale"])
            self.chinese_scale = float(header["chinese_scale"])
            self.threshold = float(header["threshold"])
            self.best_threshold = float(header["best_threshold"])
            self.veto = float(header["veto"])
            n_tokens = int(header["tokens"])
            n_slots = int(header["slots"])
            vocab_len = int(header["vocab_bytes"])
        except (ValueError, KeyError, TypeError) as exc:
            raise VectorFileError(f"bad header: {exc}") from exc
        width = len(self.classes)
        slots_start = start + header_len
        offsets_start = slots_start + 4 * n_slots
        vocab_start = offsets_start + 4 * (n_tokens + 1)
        rows_start = vocab_start + vocab_len
        if (len(self.bias) != width or n_slots < 1 or n_slots & (n_slots - 1) or n_slots <= n_tokens
                or len(data) != rows_start + n_tokens * width):
            raise VectorFileError("size does not match the header")
        view = memoryview(data)
        # Little-endian uint32 in the file, read in place ("I" is 4 bytes on every platform Python runs on).
        self._slots = view[slots_start:offsets_start].cast("I")
        self._offsets = view[offsets_start:vocab_start].cast("I")
        # A lookup stops at an empty slot and reads the offsets a slot names: both checked once here.
        if (self._offsets[0] != 0 or self._offsets[n_tokens] != vocab_len or min(self._slots) != 0
                or max(self._slots) > n_tokens):
            raise VectorFileError("bad vocabulary index")
        self._data = data  # the tokens are compared as bytes slices of it (faster than memoryview ones)
        self._vocab_start = vocab_start
        self._rows = view[rows_start:].cast("b")
        self.width = width
        self.tokens = n_tokens

    def row(self, token: str) -> memoryview | None:
        """The token's contributions (one int8 per class), or None when the table lacks it."""
        key = token.encode("utf-8")
        slots, offsets, data, base = self._slots, self._offsets, self._data, self._vocab_start
        mask = len(slots) - 1
        slot = slot_of(key, len(slots))
        while entry := slots[slot]:
            index = entry - 1
            if data[base + offsets[index]:base + offsets[index + 1]] == key:
                return self._rows[index * self.width:(index + 1) * self.width]
            slot = (slot + 1) & mask
        return None

    def scores(self, text: str) -> dict[str, float]:
        """Each class's probability for `text` (empty when the table knows none of its tokens)."""
        width = self.width
        totals = [0.0] * width
        known = False
        for tokens, scale, mean in ((english(text), self.english_scale, True),
                                    (chinese(text), self.chinese_scale, False)):
            sums, counts = [0] * width, []
            for token, count in Counter(tokens).items():
                row = self.row(token)
                if row is not None:
                    sums = (list(map(add, sums, row)) if count == 1
                            else [a + count * b for a, b in zip(sums, row, strict=True)])
                    counts.append(count)
            if counts:
                known = True
                # English words are averaged; Chinese features divided by their count vector's length.
                divisor = sum(counts) if mean else math.sqrt(sum(c * c for c in counts))
                totals = [t + s * scale / divisor for t, s in zip(totals, sums, strict=True)]
        if not known:
            return {}
        return {name: 1 / (1 + math.exp(-(total + bias)))
                for name, total, bias in zip(self.classes, totals, self.bias, strict=True)}

    def probabilities(self, text: str) -> dict[str, float]:
        """`scores` of the message's start and end (all of it when short)."""
        if len(text) > 2 * EDGE_CHARS:
            text = f"{text[:EDGE_CHARS]}\n{text[-EDGE_CHARS:]}"
        return self.scores(text)

    def doubts(self, name: str, probabilities: dict[str, float]) -> bool:
        """Whether this layer, knowing some of the message's tokens, finds toolset `name` less likely than
        `veto`: the selector then drops a BM25 match for it (BM25 matches a shared word, e.g. web for "explain
        how a web server works"; the classifier has seen such questions need no toolset)."""
        return name in probabilities and probabilities[name] < self.veto

    def matches(self, probabilities: dict[str, float], available: Collection[str], *,
                others_found: bool) -> dict[str, float]:
        """The available toolsets this layer offers for a message of these `probabilities`, with their
        probabilities: those reaching `threshold`, and, when no other layer found any toolset
        (`others_found` false), the likeliest one from `best_threshold` on; either only if likelier than
        "no toolset" (small talk)."""
        none = probabilities.get(NO_TOOLSET, 0.0)
        scores = {name: p for name, p in probabilities.items() if name in available and name != NO_TOOLSET}
        chosen = {name: p for name, p in scores.items() if p >= self.threshold and p > none}
        if scores and not others_found:
            best = max(scores, key=lambda name: scores[name])
            if scores[best] >= self.best_threshold and scores[best] > none:
                chosen[best] = scores[best]
        return chosen


_table: Table | None = None
_failed = False


def table() -> Table | None:
    """The table, read on first use; None (after one warning) when the file is missing or corrupt."""
    global _table, _failed
    if _table is None and not _failed:
        try:
            _table = Table(PATH.read_bytes())
        except (OSError, VectorFileError) as exc:
            _failed = True
            log.warning("toolset selection: vector layer off, %s unusable (%s); keywords and BM25 still select",
                        PATH, exc)
    return _table


def loaded() -> bool:
    """Whether the table has been read (start-up reads none)."""
    return _table is not None
