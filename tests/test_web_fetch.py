"""The fetcher against the local fake site, with the guard opened for these tests only
(`allow_private=True`): content types, size caps, redirects, cache, timeouts, the https upgrade."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator

import pytest
import trustme
from aiohttp import web

from connectors.web import FetchError, Guard, WebFetcher
from tests.fixtures.web import BIG_BYTES, PDF_TEXT, FakeSite
from tests.support.ports import port_of, refusing_socket


@pytest.fixture
async def fetcher() -> AsyncIterator[WebFetcher]:
    f = WebFetcher(Guard(allow_private=True))
    yield f
    await f.aclose()


async def test_html_article_becomes_markdown_with_its_title(site: FakeSite, fetcher: WebFetcher) -> None:
    page = await fetcher.fetch(site.url("/article"))
    assert page.kind == "html" and page.title == "Lisbon weekend weather"
    assert page.final_url == site.url("/article")
    assert "# Weekend in Lisbon" in page.text and "## Hour by hour" in page.text
    assert "- Afternoon: 24°C" in page.text and "[IPMA](https://www.ipma.pt/)" in page.text
    assert "Cookie settings" not in page.text and "Subscribe now" not in page.text  # boilerplate dropped


async def test_text_and_json_come_back_as_they_are(site: FakeSite, fetcher: WebFetcher) -> None:
    assert (await fetcher.fetch(site.url("/notes.txt"))).text == "plain notes\nline two"
    page = await fetcher.fetch(site.url("/data.json"))
    assert page.kind == "text" and page.text == '{"temp": 24, "city": "Lisbon"}'


async def test_pdf_becomes_text(site: FakeSite, fetcher: WebFetcher) -> None:
    page = await fetcher.fetch(site.url("/report.pdf"))
    assert page.kind == "pdf" and PDF_TEXT in page.text


async def test_image_is_an_error_naming_the_type(site: FakeSite, fetcher: WebFetcher) -> None:
    with pytest.raises(FetchError, match="serves image/png, which is not text, HTML or PDF"):
        await fetcher.fetch(site.url("/image.png"))


@pytest.mark.parametrize("path", ["/big", "/big.gz"])
async def test_a_20_mb_page_is_capped(site: FakeSite, path: str) -> None:
    fetcher = WebFetcher(Guard(allow_private=True), max_bytes=1_000_000, max_chars=50_000)
    try:
        page = await fetcher.fetch(site.url(path))
    finally:
        await fetcher.aclose()
    assert page.body_truncated and page.bytes_read == 1_000_000 < BIG_BYTES
    assert len(page.text) == 50_000 and page.chars_total == 1_000_000 and page.text_truncated


async def test_a_pdf_cut_by_the_cap_is_an_error_not_garbage(site: FakeSite) -> None:
    fetcher = WebFetcher(Guard(allow_private=True), max_bytes=300)
    try:
        with pytest.raises(FetchError, match="PDF is larger than the 300-byte limit"):
            await fetcher.fetch(site.url("/report.pdf"))
    finally:
        await fetcher.aclose()


async def test_redirect_chain_is_followed_to_its_final_url(site: FakeSite, fetcher: WebFetcher) -> None:
    page = await fetcher.fetch(site.url("/hop/4"))
    assert page.url == site.url("/hop/4") and page.final_url == site.url("/article")
    assert page.title == "Lisbon weekend weather"
    with pytest.raises(FetchError, match="more than 5 redirects"):
        await fetcher.fetch(site.url("/hop/7"))


async def test_pages_are_cached(site: FakeSite, fetcher: WebFetcher) -> None:
    before = site.hits["/data.json"]
    first = await fetcher.fetch(site.url("/data.json"))
    second = await fetcher.fetch(site.url("/data.json"))
    assert first == second and site.hits["/data.json"] == before + 1


async def test_http_errors_and_timeouts_are_readable(site: FakeSite) -> None:
    fetcher = WebFetcher(Guard(allow_private=True), timeout_s=0.5)
    try:
        with pytest.raises(FetchError, match="HTTP 404 Not Found"):
            await fetcher.fetch(site.url("/missing"))
        with pytest.raises(FetchError, match=re.escape("no complete answer within 0.5 s")):
            await fetcher.fetch(site.url("/hang"))
        with refusing_socket() as closed, pytest.raises(FetchError, match="cannot connect"):
            await fetcher.fetch(f"http://127.0.0.1:{port_of(closed)}/")
    finally:
        await fetcher.aclose()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def _tls_site(ca: trustme.CA) -> tuple[web.AppRunner, int]:
    async def notes(request: web.Request) -> web.Response:
        return web.Response(text="served over TLS", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/notes.txt", notes)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.test").configure_cert(context)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    return runner, runner.addresses[0][1]


async def _resolve_site(host: str, port: int) -> list[str]:
    assert host == "site.test"
    return ["127.0.0.1"]


async def test_http_is_upgraded_to_https_where_the_site_serves_it(site: FakeSite, ca: trustme.CA) -> None:
    runner, tls_port = await _tls_site(ca)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    guard = Guard(allow_private=True, resolver=_resolve_site, default_ports={"http": site.port, "https": tls_port})
    fetcher = WebFetcher(guard, verify=client_context)
    try:
        page = await fetcher.fetch("http://site.test/notes.txt")
        assert (page.final_url, page.text) == ("https://site.test/notes.txt", "served over TLS")
    finally:
        await fetcher.aclose()
        await runner.cleanup()


async def test_http_stays_http_where_https_is_not_served(site: FakeSite, ca: trustme.CA) -> None:
    with refusing_socket() as no_https:
        guard = Guard(allow_private=True, resolver=_resolve_site,
                      default_ports={"http": site.port, "https": port_of(no_https)})
        fetcher = WebFetcher(guard)
        try:
            page = await fetcher.fetch("http://site.test/notes.txt")
            assert (page.final_url, page.text) == ("http://site.test/notes.txt", "plain notes\nline two")
        finally:
            await fetcher.aclose()


async def test_tls_certificates_are_verified_for_the_host_name(site: FakeSite, ca: trustme.CA) -> None:
    runner, tls_port = await _tls_site(ca)
    guard = Guard(allow_private=True, resolver=_resolve_site, default_ports={"http": site.port, "https": tls_port})
    fetcher = WebFetcher(guard)  # the system trust store does not know the test CA
    try:
        with pytest.raises(FetchError, match="cannot connect"):
            await fetcher.fetch("https://site.test/notes.txt")
    finally:
        await fetcher.aclose()
        await runner.cleanup()


async def test_concurrent_fetches_run_together(site: FakeSite, fetcher: WebFetcher) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    pages = await asyncio.gather(*(fetcher.fetch(site.url(f"/slow?s=0.4&id={i}")) for i in range(5)))
    assert [p.text for p in pages] == [f"slow page {i}" for i in range(5)]
    assert loop.time() - start < 1.5  # one after another would take 2 s
