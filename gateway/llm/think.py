"""A leading `<think>…</think>` block taken out of a reply's content.

llama.cpp with `--reasoning-format none`, vLLM without a reasoning parser, several Ollama models and
distilled reasoning models put their reasoning at the head of the content itself. The owner never sees
it, and it is not kept in the history sent back (the chat templates of these models drop it too). While
streaming, nothing is handed out until the block has closed, so no reasoning reaches a phone piece by
piece; a reply whose content does not open with the tag is handed out as it comes.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"
# What the owner sees when the model's whole reply was reasoning (it ran out of tokens inside the block).
ONLY_THINKING = "⚠️ the model used the whole reply on its reasoning (not shown) and gave no answer; ask again"


def strip_think(content: str) -> str:
    """`content` without a leading think block (and the whitespace after it)."""
    head = content.lstrip()
    if not head.startswith(OPEN):
        return content
    _, closed, rest = head.partition(CLOSE)
    return rest.lstrip() if closed else ""


class ThinkFilter:
    """Streamed content with a leading think block held back and dropped. `feed` returns what may be
    shown of each piece; `thinking` says the content opened with a block (`strip_think`'s case)."""

    def __init__(self) -> None:
        self._held = ""  # what arrived before it was known whether a block opens, or while one is open
        self._state = "start"  # start -> inside -> lead -> after, or start -> after
        self._scanned = 0  # how far the held text was searched for the closing tag
        self.thinking = False

    def feed(self, piece: str) -> str:
        if self._state == "after":
            return piece
        if self._state == "lead":  # the whitespace after the block is not shown either
            piece = piece.lstrip()
            if piece:
                self._state = "after"
            return piece
        self._held += piece
        if self._state == "start":
            head = self._held.lstrip()
            if len(head) < len(OPEN) and OPEN.startswith(head):
                return ""  # "", whitespace, or the tag's beginning: not known yet
            if not head.startswith(OPEN):
                self._state, shown, self._held = "after", self._held, ""
                return shown
            self._state, self.thinking = "inside", True
        end = self._held.find(CLOSE, max(0, self._scanned - len(CLOSE)))
        self._scanned = len(self._held)
        if end < 0:
            return ""
        rest, self._held, self._state = self._held[end + len(CLOSE):], "", "lead"
        return self.feed(rest) if rest else ""

    def end(self) -> str:
        """What is still held when the stream ends: a beginning that never became a tag is shown."""
        held, self._held = (self._held, "") if self._state == "start" else ("", "")
        return held
