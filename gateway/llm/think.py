"""The model's reasoning taken out of a reply's content: a leading `<think>…</think>` block, or everything
before a `</think>` that no `<think>` opened.

llama.cpp with `--reasoning-format none`, vLLM without a reasoning parser, several Ollama models and
distilled reasoning models put their reasoning at the head of the content itself. Some open the block in
the prompt instead (DeepSeek-R1 distills, QwQ, Qwen3 whose template ends with `<think>`): their content
is `reasoning…</think>answer`, with only the closing tag. The owner never sees either, and it is not kept
in the history sent back (the chat templates of these models drop it too).

While streaming, a reply that opens with `<think>` shows nothing until the block has closed, so no
reasoning reaches a phone piece by piece. A reply that does not is handed out as it comes, since nothing
tells its reasoning apart from an answer until the closing tag: if a `</think>` arrives with no `<think>`
before it, the text handed out so far was reasoning, and the next piece is a `Restart` — the reply's text
starts over with what follows the tag (a live message is edited to it).
"""

from __future__ import annotations

from gateway.llm.types import Restart

OPEN, CLOSE = "<think>", "</think>"
# What the owner sees when the model's whole reply was reasoning (it ran out of tokens inside the block).
ONLY_THINKING = "⚠️ the model used the whole reply on its reasoning (not shown) and gave no answer; ask again"
_TAIL = len(CLOSE) - 1  # what a tag split across pieces may have left at the end of the last one


def strip_think(content: str) -> str:
    """`content` without its reasoning (and the whitespace after it): a leading think block, or what
    comes before a `</think>` with no `<think>` before it."""
    head = content.lstrip()
    if head.startswith(OPEN):
        _, closed, rest = head.partition(CLOSE)
        return rest.lstrip() if closed else ""
    end = content.find(CLOSE)
    if end < 0 or OPEN in content[:end]:
        return content
    return content[end + len(CLOSE):].lstrip()


class ThinkFilter:
    """Streamed content with its reasoning left out, as `strip_think` leaves it out of a whole reply.
    `feed` returns what may be shown of each piece (a `Restart` when what was shown before it was
    reasoning); `thinking` says reasoning was found. Each piece is scanned once; only a tag's length of
    text is kept between pieces (and, before the first text, whitespace and a beginning of `<think>`)."""

    def __init__(self) -> None:
        self._held: list[str] = []  # "start": what arrived before it was known whether a block opens
        self._head = ""  # "start": the held text from its first non-space character (a few characters)
        self._tail = ""  # "inside", "watch": the end of the text scanned, where a tag may have begun
        # start -> inside -> lead -> after; start -> watch (-> lead -> after, or -> after)
        self._state = "start"
        self.thinking = False

    def feed(self, piece: str) -> str:
        if self._state == "after":
            return piece
        if self._state == "lead":
            return self._lead(piece)
        if self._state == "inside":
            return self._inside(piece)
        if self._state == "watch":
            return self._watch(piece)
        self._held.append(piece)
        self._head += piece if self._head else piece.lstrip()
        if len(self._head) < len(OPEN) and OPEN.startswith(self._head):
            return ""  # "", whitespace, or the tag's beginning: not known yet
        held, self._held = "".join(self._held), []
        if self._head.startswith(OPEN):
            self._state, self.thinking = "inside", True
            return self._inside(self._head[len(OPEN):])
        self._state = "watch"
        return self._watch(held)

    def end(self) -> str:
        """What is still held when the stream ends: a beginning that never became a tag is shown."""
        held, self._held = ("".join(self._held) if self._state == "start" else ""), []
        return held

    def _inside(self, piece: str) -> str:
        """A piece of an open block: nothing is shown until it closes; what follows the tag is."""
        scanned = self._tail + piece
        end = scanned.find(CLOSE)
        if end < 0:
            self._tail = scanned[-_TAIL:]
            return ""
        self._state, self._tail = "lead", ""
        return self._lead(scanned[end + len(CLOSE):])

    def _lead(self, piece: str) -> str:
        """The whitespace after the reasoning is not shown either."""
        piece = piece.lstrip()
        if piece:
            self._state = "after"
        return piece

    def _watch(self, piece: str) -> str:
        """Shown as it comes, until a `</think>` shows it was reasoning (a `<think>` first ends the watch)."""
        scanned = self._tail + piece
        end, opened = scanned.find(CLOSE), scanned.find(OPEN)
        if end >= 0 and not 0 <= opened < end:
            self._state, self._tail, self.thinking = "lead", "", True
            return Restart(self._lead(scanned[end + len(CLOSE):]))
        if opened >= 0:
            self._state, self._tail = "after", ""
        else:
            self._tail = scanned[-_TAIL:]
        return piece
