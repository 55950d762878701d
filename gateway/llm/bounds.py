"""How much of a model endpoint's answer is read, and for how long (docs/limits.md).

A provider's answer is JSON of a few kilobytes, or a stream of small events; an endpoint that sends
hundreds of megabytes, one endless line, or a drip that never ends is broken or hostile, and must cost
neither the process's memory nor the turn's time. Past a bound the answer is refused with a clear error
and not retried (it would be the same answer again); a stream that had begun is cut off (ModelCutOff),
and the turn keeps nothing of it but what the person already saw, marked as cut.
"""

from __future__ import annotations

from gateway.llm.sse import MAX_EVENT_CHARS

MAX_ANSWER_BYTES = 16 * 1024 * 1024  # a whole (non-streamed) answer's body, decoded
MAX_ERROR_BYTES = 64 * 1024  # of an error answer's body: its message is at the start
STREAM_MAX_S = 600.0  # a whole streamed answer, unless [model] stream_max_s says otherwise

__all__ = ["MAX_ANSWER_BYTES", "MAX_ERROR_BYTES", "MAX_EVENT_CHARS", "STREAM_MAX_S", "AnswerTooLarge", "Budget",
           "too_large"]


def too_large(where: str, cause: str) -> str:
    """The error a person reads when the model at `where` went past a bound (`cause` says which)."""
    return f"the answer of the model at {where} was refused: {cause} (docs/limits.md)"


class AnswerTooLarge(ValueError):
    """A streamed answer kept more than a whole answer may hold; the message says so."""


class Budget:
    """What one streamed answer keeps (text, reasoning, thinking, tool input, the blocks and calls that
    hold them), bounded as a whole answer's body is: at most `limit` characters in all. The SSE framing
    and each event's JSON are not kept, so they do not count (a stream's events are bounded one by one,
    gateway/llm/sse.py, and its time by `stream_max_s`)."""

    def __init__(self, limit: int = MAX_ANSWER_BYTES) -> None:
        self.limit = limit
        self._left = limit

    def take(self, piece: str) -> str:
        """`piece`, counted; raises AnswerTooLarge once the answer's pieces add up to more than the limit."""
        self._left -= len(piece)
        if self._left < 0:
            raise AnswerTooLarge(f"it streamed an answer larger than {self.limit // (1024 * 1024)} MB")
        return piece
