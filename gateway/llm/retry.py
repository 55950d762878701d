"""Retrying a model call: backoff, Retry-After, and the fallback model.

Both providers hand `with_retries` one attempt function; an attempt raises `TransientError` for a
failure worth retrying (429, 5xx, connection problems, timeouts) and `ModelUnavailable` for one that is
not (a bad key, a malformed request). Each model in `models` gets `max_retries` retries after its first
attempt; when the main model is exhausted the fallback model runs through the same loop once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from gateway.llm.types import ModelUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


class TransientError(Exception):
    """One attempt failed in a way that may succeed later.

    `cause` is phrased for a person ("HTTP 503 Service Unavailable", "connection refused");
    `retry_after` is the wait in seconds the server asked for, if it did; `status` the HTTP status, if
    there was an answer.
    """

    def __init__(self, cause: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after
        self.status = status


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. Tests shrink `backoff_base_s` so retries take milliseconds."""

    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 20.0
    retry_after_cap_s: float = 60.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `retry` (0-based).

        The server's Retry-After wins when given (capped, so a confused proxy cannot park a turn for an
        hour); otherwise exponential backoff with full jitter, which spreads out many clients that failed
        at the same moment.
        """
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap_s)
        return random.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2**retry))


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a response asks for, in seconds, or None.

    Reads `retry-after-ms` (sent by OpenAI) and `Retry-After` as delay-seconds or an HTTP date.
    Fractional seconds are accepted although the RFC only allows integers: being lenient costs nothing.
    `headers` must look keys up case-insensitively (httpx.Headers does).
    """
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT; some servers omit the zone
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


async def with_retries(
    attempt: Callable[[str], Awaitable[T]],
    models: Sequence[str],
    policy: RetryPolicy,
    where: str,
) -> T:
    """Run `attempt(model)` until it succeeds, retrying transient failures, then the next model.

    `where` names the endpoint in the final error ("the model at <where> is not answering: ...").
    `ModelUnavailable` raised by an attempt propagates at once: retrying a refused request, or sending it
    to the fallback model with the same key, would only fail again more slowly.
    """
    if not models:
        raise ValueError("with_retries needs at least one model")
    cause, status = "", None
    for index, model in enumerate(models):
        for retry in range(policy.max_retries + 1):
            try:
                return await attempt(model)
            except TransientError as exc:
                cause, status = exc.cause, exc.status
                if retry == policy.max_retries:
                    break
                delay = policy.delay(retry, exc.retry_after)
                log.warning(
                    "model_retry url=%s model=%s attempt=%d/%d cause=%r delay_s=%.2f",
                    where, model, retry + 1, policy.max_retries + 1, cause, delay,
                )
                await asyncio.sleep(delay)
        if index + 1 < len(models):
            log.warning("model_fallback url=%s from=%s to=%s cause=%r", where, model, models[index + 1], cause)
    tried = f"{policy.max_retries + 1} attempt(s)"
    if len(models) > 1:
        tried += f" each for {', '.join(repr(m) for m in models)}"
    raise ModelUnavailable(f"the model at {where} is not answering: {cause} ({tried})", status)
