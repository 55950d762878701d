"""Web search backends: SearXNG's JSON API (self-hosted, no key), Brave Search API, Tavily.

Each backend turns a query into ranked `SearchResult`s (title, URL, snippet). The backend's own URL is
the operator's choice (SearXNG usually runs on localhost), so it is reached with a plain client, not
through the private-network guard; the guard applies to the URLs the model fetches afterwards.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import httpx
from pydantic import BaseModel

log = logging.getLogger(__name__)

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"
MAX_COUNT = 20


class SearchError(Exception):
    """The backend could not answer; the message says why (no secret in it)."""


class SearchResult(BaseModel):
    title: str
    url: str
    snippet: str = ""


class SearchBackend(Protocol):
    name: str

    async def search(self, query: str, count: int) -> list[SearchResult]:
        """Up to `count` results for `query`, best first."""
        ...

    async def aclose(self) -> None:
        ...


class _HTTPBackend:
    name = "base"

    def __init__(self, url: str, api_key: str | None, timeout_s: float, key_env: str = "") -> None:
        self.url = url
        self.api_key = api_key
        self.key_env = key_env
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), trust_env=True)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _need_key(self) -> str:
        if not self.api_key:
            raise SearchError(f"web search with {self.name} needs an API key in ${self.key_env}, which is not set")
        return self.api_key

    async def _json(self, request: httpx.Request) -> Any:
        try:
            response = await self._client.send(request)
        except httpx.HTTPError as exc:
            raise SearchError(f"the {self.name} search backend is unreachable ({type(exc).__name__})") from None
        if response.status_code in (401, 403):
            raise SearchError(f"the {self.name} search backend refused the API key (HTTP {response.status_code})")
        if response.status_code == 429:
            raise SearchError(f"the {self.name} search backend is rate-limiting; try again later")
        if response.status_code >= 400:
            raise SearchError(f"the {self.name} search backend answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise SearchError(f"the {self.name} search backend did not answer JSON "
                              "(for SearXNG, enable the json format under search.formats)") from None


def _results(items: Any, title: str, url: str, snippet: str, count: int) -> list[SearchResult]:
    out: list[SearchResult] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get(url):
            out.append(SearchResult(title=str(item.get(title) or item[url]), url=str(item[url]),
                                    snippet=str(item.get(snippet) or "")))
    return out[:count]


class SearxngSearch(_HTTPBackend):
    name = "searxng"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        request = self._client.build_request("GET", self.url.rstrip("/") + "/search",
                                             params={"q": query, "format": "json"})
        data = await self._json(request)
        return _results(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", count)


class BraveSearch(_HTTPBackend):
    name = "brave"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        request = self._client.build_request("GET", self.url, params={"q": query, "count": min(count, MAX_COUNT)},
                                             headers={"X-Subscription-Token": self._need_key(),
                                                      "Accept": "application/json"})
        data = await self._json(request)
        web = data.get("web") if isinstance(data, dict) else None
        return _results(web.get("results") if isinstance(web, dict) else None, "title", "url", "description", count)


class TavilySearch(_HTTPBackend):
    name = "tavily"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        request = self._client.build_request("POST", self.url, json={"query": query, "max_results": count},
                                             headers={"Authorization": f"Bearer {self._need_key()}"})
        data = await self._json(request)
        return _results(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", count)


def search_backend(kind: str, *, searxng_url: str, api_key: str | None, key_env: str, timeout_s: float,
                   url: str | None = None) -> SearchBackend | None:
    """The configured backend, or None for "none". `url` overrides the Brave/Tavily endpoint (tests)."""
    if kind == "searxng":
        return SearxngSearch(searxng_url, None, timeout_s)
    if kind == "brave":
        return BraveSearch(url or BRAVE_URL, api_key, timeout_s, key_env)
    if kind == "tavily":
        return TavilySearch(url or TAVILY_URL, api_key, timeout_s, key_env)
    return None
