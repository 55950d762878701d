"""The web toolset: search the public web, read a page, read up to five pages at once.

Every page and every search result reaches the model inside an untrusted block naming its URL
(`ctx.external("web:<url>", ...)`): a web page is information, never instructions. So is a failure
that quotes a server (`FetchError.remote`); a status's reason phrase is never shown. The fetcher
(`connectors.web`) refuses private and internal addresses and applies the host rules at every redirect.
`web_search` exists only when a search backend is configured (the "web_search" service).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from connectors.web import FetchError, Page, SearchError, WebFetcher
from toolsets.base import Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "web",
    "the public web: search (when a backend is configured), read a page as text, read up to five pages",
    # Weather and news in a sentence that asks for something recurring ("every morning tell me the weather")
    # are the automation's business: its runs are selected from their own prompt, so the request that creates
    # one needs no web. The sentence is matched from its start, which bounds how far back a match can begin.
    keywords=(
        r"https?://", r"\bwww\.[\w-]",
        r"\b[\w-]{1,63}(?:\.com/|\.org/|\.net/|\.io/|\.dev/|\.gov/|\.edu/|\.ai/|\.co/|\.info/)",
        r"\bsearch(?:es|ed|ing)? (?:for|the web|online|the internet)\b", r"\bweb ?search\b", r"\bgoogle\b",
        r"\blook(?:ing)? (?:it |this |that |them )?up\b", r"\blookup\b", r"\blatest\b",
        r"(?:^|(?<=[.?!\n]))(?![^.?!\n]{0,200}\b(?:every|each|daily|weekly|hourly)\b)[^.?!\n]{0,150}?\b(?:weather"
        r"|forecast|news|headlines?)\b",
        r"\b(?:will it|is it) (?:going to |gonna )?(?:rain|snow|be (?:sunny|hot|cold|warm|windy|stormy))\b",
        r"\bweb ?(?:site|page)s?\b", r"\bsite\b", r"\blinks?\b", r"\barticles?\b", r"\burls?\b",
        r"\b(?:find|check|look|read|buy|order|saying|said|reviews?|prices?)\b[^.?!\n]{0,20}\bonline\b",
        r"\binternet\b", r"\bbrowse\b", r"\bwikipedia\b", r"\bstock price\b", r"\bexchange rate\b", r"\bscores?\b",
        r"\bwho won\b",
        r"(?:^|(?<=[。！？.?!\n]))(?![^。！？.?!\n]{0,100}(?:每天|每周|每月|每小时|每个?早上|每晚"
        r"|后台))[^。！？.?!\n]{0,80}?(?:天气|预报|新闻)",
        r"下雨", r"下雪", r"气温", r"搜索", r"搜一下", r"搜一搜", r"上网", r"(?:开放|营业|开门|关门)时间", r"票价",
        r"网上", r"网页", r"网站", r"链接", r"网址", r"最新", r"百度", r"谷歌", r"文章", r"汇率", r"股价", r"比分",
        r"维基",
    ),
    requires="web",
)

MAX_URLS = 5
PAGE_CHARS = 100_000  # one page; the output budget persists what is beyond the visible part
EXTRACT_CHARS = 40_000  # each of up to five pages
Url = Annotated[str, Field(min_length=8, max_length=2048)]


def _fetcher(ctx: ToolContext) -> WebFetcher:
    fetcher = ctx.service("web")
    if fetcher is None:
        raise ToolError("web access is not available in this runtime")
    return fetcher


def _render(ctx: ToolContext, page: Page) -> str:
    """The page inside its untrusted block, with our own notes (sizes, cuts) outside it."""
    head = [f"Title: {page.title}"] if page.title else []
    head.append(f"URL: {page.final_url}")
    if page.final_url != page.url:
        head.append(f"(asked for {page.url})")
    block = ctx.external(f"web:{page.final_url}", "\n".join(head) + "\n\n" + (page.text or "(the page has no text)"))
    notes = []
    if page.body_truncated:
        notes.append(f"only the first {page.bytes_read} bytes of the page were read")
    if page.text_truncated:
        notes.append(f"text cut at {len(page.text)} of {page.chars_total} characters")
    return block + (f"\n[{'; '.join(notes)}]" if notes else "")


def _failure(ctx: ToolContext, url: str, exc: FetchError) -> str:
    """Why a fetch failed; a message that quotes a server (its content type, a redirect's URL) is outside
    content like the page itself, so it is shown in its block and taints the conversation."""
    return ctx.external(f"web:{url}", str(exc)) if exc.remote else str(exc)


@TOOLSET.tool(risk=Risk.READ, visible_chars=6000, requires="web_search")
async def web_search(ctx: ToolContext, query: Annotated[str, Field(min_length=2, max_length=400)],
                     count: Annotated[int, Field(ge=1, le=10)] = 5) -> str:
    """Search the public web. Returns ranked results (title, URL, snippet); read one with web_fetch.

    Args:
        query: What to search for, as you would type it into a search engine.
        count: How many results (1-10).
    """
    backend = ctx.service("web_search")
    if backend is None:
        raise ToolError("no web search backend is configured ([web] search in the config)")
    try:
        results = await backend.search(query, count)
    except SearchError as exc:
        raise ToolError(str(exc)) from None
    if not results:
        return f"No results for {query!r}."
    lines = [f"{len(results)} result(s) for {query!r}:"]
    for rank, r in enumerate(results, 1):
        lines.append(f"{rank}. " + ctx.external(f"web:{r.url}", f"{r.title}\n{r.url}\n{r.snippet}".strip()))
    return "\n".join(lines)


@TOOLSET.tool(risk=Risk.READ, visible_chars=8000)
async def web_fetch(ctx: ToolContext, url: Url) -> str:
    """Read one public web page (http or https) as text: HTML as Markdown, text/JSON/XML as is, PDF as
    text. Returns the title, the final URL after redirects, and the content. Private and internal
    network addresses are refused.

    Args:
        url: The page's full URL, starting with http:// or https://.
    """
    try:
        page = await _fetcher(ctx).fetch(url, max_chars=PAGE_CHARS)
    except FetchError as exc:
        raise ToolError(_failure(ctx, url, exc)) from None
    return _render(ctx, page)


@TOOLSET.tool(risk=Risk.READ, visible_chars=12000)
async def web_extract(ctx: ToolContext, urls: Annotated[list[Url], Field(min_length=1, max_length=MAX_URLS)]) -> str:
    """Read up to five public web pages at once (to compare or summarise them). Each page is reported
    on its own; one that fails does not stop the others.

    Args:
        urls: One to five full http(s) URLs.
    """
    fetcher = _fetcher(ctx)
    unique = list(dict.fromkeys(urls))
    # Each fetch carries its own timeout (the fetcher's), so one slow site cannot hold up the rest.
    outcomes = await asyncio.gather(*(fetcher.fetch(u, max_chars=EXTRACT_CHARS) for u in unique),
                                    return_exceptions=True)
    parts = []
    for i, (url, outcome) in enumerate(zip(unique, outcomes, strict=True), 1):
        if isinstance(outcome, Page):
            parts.append(f"## {i}. {url}\n{_render(ctx, outcome)}")
        elif isinstance(outcome, FetchError):
            parts.append(f"## {i}. {url}\nFailed: {_failure(ctx, url, outcome)}")
        else:
            raise outcome  # a bug, not a site failing: let the runtime report it
    ok = sum(isinstance(o, Page) for o in outcomes)
    return f"Read {ok} of {len(unique)} page(s).\n\n" + "\n\n".join(parts)
