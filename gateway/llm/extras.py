"""Which provider opaque extras belong to, so they go back to it alone.

A provider returns fields it wants back on the next request (thinking blocks and their signatures,
thought signatures, reasoning content) and another provider rejects or misreads them: Anthropic's
signatures mean nothing to an OpenAI-compatible server, and a strict one answers 400 to a field it does
not know. A conversation outlives its model config, so each stored message names its source: the wire
format and the base URL (without credentials or query), hashed so the URL itself is never stored.
"""

from __future__ import annotations

import hashlib

from gateway.llm.types import ChatMessage, ProviderExtras


def source_of(wire: str, display_url: str) -> str:
    """The source id of a client speaking `wire` at `display_url`."""
    return f"{wire}:{hashlib.sha256(display_url.encode()).hexdigest()[:16]}"


def extras_for(message: ChatMessage, source: str) -> ProviderExtras | None:
    """The message's extras when they came from `source`, else None."""
    extras = message.extras
    return extras if extras is not None and extras.source == source else None
