"""The web connector: a guarded fetcher of public http(s) pages and the search backends.

`guard` decides which URLs may be fetched and at which address; `hosts` holds the allowed/denied host
patterns; `content` turns a body into text by its type; `fetch` joins them; `search` holds the backends.
"""

from connectors.web.content import Readable, UnsupportedContent, extractor_problem
from connectors.web.fetch import FetchError, Page, WebFetcher
from connectors.web.guard import BlockedURL, Guard, Resolver, Target, blocked_reason, system_resolver
from connectors.web.hosts import HostRules, normalise_pattern
from connectors.web.search import SearchBackend, SearchError, SearchResult, search_backend

__all__ = [
    "BlockedURL", "FetchError", "Guard", "HostRules", "Page", "Readable", "Resolver", "SearchBackend",
    "SearchError", "SearchResult", "Target", "UnsupportedContent", "WebFetcher", "blocked_reason",
    "extractor_problem", "normalise_pattern", "search_backend", "system_resolver",
]
