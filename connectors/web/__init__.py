"""The web connector: a guarded fetcher of public http(s) pages and the search backends.

`guard` decides which URLs may be fetched and at which address; `hosts` holds the allowed/denied host
patterns; `content` turns a body into text by its type; `fetch` joins them; `search` holds the backends.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connectors.web.content import Readable, UnsupportedContent, extractor_problem
    from connectors.web.fetch import FetchError, Page, WebFetcher
    from connectors.web.guard import BlockedURL, Guard, Resolver, Target, blocked_reason, system_resolver
    from connectors.web.hosts import HostRules, normalise_pattern
    from connectors.web.search import SearchBackend, SearchError, SearchResult, search_backend

# Each name is imported from its module on first use: the config reads only `hosts`, and importing it
# must not bring the fetcher's HTTP client or the content converters with it.
_HOME = {
    "Readable": "content", "UnsupportedContent": "content", "extractor_problem": "content",
    "FetchError": "fetch", "Page": "fetch", "WebFetcher": "fetch",
    "BlockedURL": "guard", "Guard": "guard", "Resolver": "guard", "Target": "guard", "blocked_reason": "guard",
    "system_resolver": "guard",
    "HostRules": "hosts", "normalise_pattern": "hosts",
    "SearchBackend": "search", "SearchError": "search", "SearchResult": "search", "search_backend": "search",
}
# Written out (not `sorted(_HOME)`) so that linters and type checkers see the re-exports; the same names.
__all__ = [
    "BlockedURL", "FetchError", "Guard", "HostRules", "Page", "Readable", "Resolver", "SearchBackend", "SearchError",
    "SearchResult", "Target", "UnsupportedContent", "WebFetcher", "blocked_reason", "extractor_problem",
    "normalise_pattern", "search_backend", "system_resolver",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"connectors.web.{_HOME[name]}"), name)
