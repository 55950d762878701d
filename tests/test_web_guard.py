"""The private-network guard and the host rules: every spelling of an internal address is refused, a
public-looking name that resolves inside is refused, redirects are re-checked, host patterns match as
documented. Refusals are checked against the real fake site: a refused URL never reaches it."""

from __future__ import annotations

import ipaddress
import re

import pytest

from connectors.web import BlockedURL, FetchError, Guard, HostRules, WebFetcher, blocked_reason
from tests.fixtures.web import FakeSite

PUBLIC = "93.184.216.34"


def resolver(table: dict[str, list[str]]):
    """A resolver hook answering from `table`; any other name fails like an unknown host."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        if host not in table:
            raise BlockedURL(f"cannot resolve host {host!r}")
        return table[host]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


INTERNAL = [
    "http://127.0.0.1/", "http://127.1/", "http://2130706433/", "http://0x7f.0.0.1/", "http://0x7f000001/",
    "http://0177.0.0.1/", "http://017700000001/", "http://127.0.0.1./", "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/", "http://[::1]/", "http://[::]/", "http://localhost/", "http://LOCALHOST./",
    "http://api.localhost/", "http://example.com@127.0.0.1/", "http://user:pw@127.1:8080/",
    "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/", "http://100.64.0.1/", "http://100.127.255.254/", "http://0.0.0.0/", "http://0/",
    "http://0.1.2.3/", "http://[fe80::1]/", "http://[fe80::1%25eth0]/", "http://[fc00::1]/", "http://[fd12:3456::1]/",
    "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://[2002:c0a8:101::]/", "http://224.0.0.1/",
    "http://255.255.255.255/", "https://10.1/", "http://192.168.0x1.1/",
]


@pytest.mark.parametrize("url", INTERNAL)
async def test_every_spelling_of_an_internal_address_is_refused(url: str) -> None:
    lookup = resolver({})
    with pytest.raises(BlockedURL, match=r"private|local|loopback|metadata|carrier-grade|not a public|this machine"):
        await Guard(resolver=lookup).check(url)
    assert lookup.asked == []  # decided from the URL alone: no DNS involved


@pytest.mark.parametrize("url", ["http://example.com\\@127.0.0.1/", "http://exa mple.com/", "http://a.com/\n",
                                 "file:///etc/passwd", "ftp://example.com/", "gopher://127.0.0.1:25/",
                                 "//example.com/", "http:///path", "http://1.2.3.999/", "http://256.1/",
                                 "http://0x1g.0.0.1/", "http://bad_host!/"])
async def test_odd_urls_are_refused(url: str) -> None:
    with pytest.raises(BlockedURL):
        await Guard(resolver=resolver({"example.com": [PUBLIC]})).check(url)


async def test_user_info_trick_checks_the_host_after_the_at_sign() -> None:
    lookup = resolver({"example.com": [PUBLIC], "evil.test": ["127.0.0.1"]})
    target = await Guard(resolver=lookup).check("http://127.0.0.1@example.com/page")
    assert (target.host, target.address, target.url) == ("example.com", PUBLIC, "http://example.com/page")
    with pytest.raises(BlockedURL, match=re.escape("evil.test resolves to 127.0.0.1")):
        await Guard(resolver=lookup).check("https://example.com@evil.test/")


async def test_public_looking_name_resolving_inside_is_refused_and_never_contacted(site: FakeSite) -> None:
    lookup = resolver({"news.example.com": ["127.0.0.1"], "mixed.example.com": [PUBLIC, "127.0.0.1"],
                       "meta.example.com": ["169.254.169.254"], "v6.example.com": ["::ffff:10.0.0.1"]})
    fetcher = WebFetcher(Guard(resolver=lookup))
    try:
        for host in ("news.example.com", "mixed.example.com", "meta.example.com", "v6.example.com"):
            with pytest.raises(FetchError, match=f"refused: {host} resolves to"):
                await fetcher.fetch(f"http://{host}:{site.port}/secret")
    finally:
        await fetcher.aclose()
    assert site.hits["/secret"] == 0


async def test_loopback_spellings_of_the_real_server_never_reach_it(site: FakeSite) -> None:
    fetcher = WebFetcher(Guard(resolver=resolver({})))
    try:
        for host in ("127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "[::ffff:127.0.0.1]", "localhost"):
            with pytest.raises(FetchError, match="refused"):
                await fetcher.fetch(f"http://{host}:{site.port}/secret")
    finally:
        await fetcher.aclose()
    assert site.hits["/secret"] == 0


def _pretend_public(address: str):
    """An address policy for one test: `address` counts as public, everything else as usual."""
    exempt = ipaddress.ip_address(address)
    return lambda ip: None if ip == exempt else blocked_reason(ip)


async def test_redirect_from_an_allowed_server_to_loopback_is_refused(site: FakeSite) -> None:
    guard = Guard(resolver=resolver({"site.test": ["127.0.0.2"]}), address_policy=_pretend_public("127.0.0.2"))
    fetcher = WebFetcher(guard)
    start = f"http://site.test:{site.alt_port}"
    try:
        page = await fetcher.fetch(f"{start}/article")  # the allowed server itself is fine
        assert page.title == "Lisbon weekend weather"
        for inside in (site.url("/secret"), f"http://127.1:{site.port}/secret", f"http://localhost:{site.port}/secret"):
            with pytest.raises(FetchError, match="refused"):
                await fetcher.fetch(f"{start}/redirect?to={inside}")
    finally:
        await fetcher.aclose()
    assert site.hits["/secret"] == 0


async def test_redirect_to_a_denied_host_is_refused(site: FakeSite) -> None:
    guard = Guard(HostRules(denied=["*.blocked.test"]), resolver=resolver({"site.test": ["127.0.0.2"],
                                                                           "x.blocked.test": ["127.0.0.2"]}),
                  address_policy=_pretend_public("127.0.0.2"))
    fetcher = WebFetcher(guard)
    try:
        with pytest.raises(FetchError, match=r"x.blocked.test is in denied_hosts \(\*.blocked.test\)"):
            await fetcher.fetch(f"http://site.test:{site.alt_port}/redirect?to=http://x.blocked.test:{site.alt_port}/secret")
    finally:
        await fetcher.aclose()
    assert site.hits["/secret"] == 0


async def test_allow_private_urls_opens_the_private_network_but_not_the_host_rules(site: FakeSite) -> None:
    fetcher = WebFetcher(Guard(HostRules(denied=["127.0.0.2"]), allow_private=True))
    try:
        assert (await fetcher.fetch(site.url("/notes.txt"))).text.startswith("plain notes")
        with pytest.raises(FetchError, match="denied_hosts"):
            await fetcher.fetch(site.url("/notes.txt", host="127.0.0.2"))
    finally:
        await fetcher.aclose()


@pytest.mark.parametrize("pattern,host,matches", [
    ("example.com", "example.com", True), ("example.com", "www.example.com", False),
    ("*.example.com", "www.example.com", True), ("*.example.com", "a.b.example.com", True),
    ("*.example.com", "example.com", False), ("*.example.com", "badexample.com", False),
    ("EXAMPLE.com.", "example.com", True), ("Bücher.example", "xn--bcher-kva.example", True),
    ("*.bücher.example", "shop.xn--bcher-kva.example", True),
])
def test_host_patterns(pattern: str, host: str, matches: bool) -> None:
    assert (HostRules(allowed=[pattern]).refusal(host) is None) is matches
    assert (HostRules(denied=[pattern]).refusal(host) is not None) is matches


async def test_allowed_hosts_limits_fetches_and_reads_urls_the_way_they_connect() -> None:
    lookup = resolver({"docs.example.com": [PUBLIC], "evil.test": [PUBLIC], "xn--bcher-kva.example": [PUBLIC]})
    guard = Guard(HostRules(allowed=["*.example.com", "bücher.example"]), resolver=lookup)
    assert (await guard.check("https://DOCS.Example.com/a")).host == "docs.example.com"
    assert (await guard.check("https://Bücher.example/")).host == "xn--bcher-kva.example"
    for url in ("https://docs.example.com@evil.test/", "https://evil.test/#docs.example.com",
                "https://evil.test/?docs.example.com"):
        with pytest.raises(BlockedURL, match=re.escape("evil.test is not in allowed_hosts")):
            await guard.check(url)


def test_bad_patterns_are_config_errors_naming_the_key() -> None:
    from gateway.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"\[web.denied_hosts\].*'\*' may only start a pattern"):
        parse_config({"web": {"denied_hosts": ["ex*ample.com"]}})
    with pytest.raises(ConfigError, match=r"\[web.allowed_hosts\].*not a valid host name"):
        parse_config({"web": {"allowed_hosts": ["exa mple.com"]}})
    assert parse_config({"web": {"allowed_hosts": ["*.Example.COM"]}}).web.allowed_hosts == ["*.example.com"]


@pytest.mark.parametrize("url", ["http://93.184.216.34/", "http://[::ffff:93.184.216.34]/", "http://[64:ff9b::5db8:d822]/",
                                 "http://[2002:5db8:d822::]/", "http://[2606:4700:4700::1111]/", "http://1.1/"])
async def test_public_addresses_pass_in_any_form(url: str) -> None:
    # 64:ff9b::/96 is where DNS64 puts every IPv4-only site on an IPv6-only network: public inside, public.
    target = await Guard(resolver=resolver({})).check(url)
    assert target.address == target.host


async def test_the_checked_address_is_the_one_connected_to(site: FakeSite) -> None:
    """DNS rebinding: the name answers "public" for the check and 127.0.0.1 afterwards. One lookup per
    hop, and the request goes to the checked address (the system resolver does not know the name)."""
    answers = [["127.0.0.2"]]
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers.pop() if answers else ["127.0.0.1"]

    fetcher = WebFetcher(Guard(resolver=rebinding, address_policy=_pretend_public("127.0.0.2")))
    try:
        page = await fetcher.fetch(f"http://rebind.test:{site.alt_port}/notes.txt")
    finally:
        await fetcher.aclose()
    assert page.text.startswith("plain notes") and asked == ["rebind.test"]
