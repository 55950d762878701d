"""The private-network guard: which URL a model-supplied fetch may reach, and at which address.

A URL is checked in three steps, and every redirect hop is checked again from the start:

1. Parse: http(s) only; the host is the one after any `user@` (as `urllib.parse` reads it); no
   whitespace, backslashes or control characters anywhere (parsers disagree about those). The host is
   lower-cased and IDNA-encoded; a host that is a number in any IPv4 spelling (`127.1`, `2130706433`,
   `0x7f.0.0.1`, `0177.0.0.1`) is read as the address it means.
2. Host rules (`HostRules`): `denied_hosts`, then `allowed_hosts` when that list is non-empty.
3. Addresses: the host is resolved once (through a replaceable resolver) and refused when *any* of its
   addresses is not on the public internet (loopback, RFC 1918, link-local and cloud metadata, CGNAT,
   0.0.0.0/8, IPv6 ULA and link-local, multicast, reserved, and IPv4 addresses embedded in IPv6 —
   mapped, NAT64, 6to4). `localhost` and `*.localhost` are refused by name.

The result names the address to connect to, so the fetcher never resolves the name a second time (a
DNS answer that changes between check and connect — rebinding — cannot slip in).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from connectors.web.hosts import HostRules, address_key, normalise_host

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
AddressPolicy = Callable[[IPAddress], str | None]

DEFAULT_PORTS = {"http": 80, "https": 443}
_FORBIDDEN_CHARS = re.compile(r"[\s\\\x00-\x1f\x7f]")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Named for the reader; each is also caught by the general test below.
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NUMERIC_LABEL = re.compile(r"^(?:\d+|0x[0-9a-f]*)$", re.IGNORECASE)


class BlockedURL(Exception):
    """The URL may not be fetched; the message says why, for the model to read."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to send the request and what to call the host (Host header, TLS name)."""

    url: str  # normalised: lower-case IDNA host, no user info
    scheme: str
    host: str
    port: int
    address: str  # the checked IP address to connect to
    target: str  # path and query as sent


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system resolver (without blocking the event loop)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BlockedURL(f"cannot resolve host {host!r}: {exc.strerror}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def ipv4_number(host: str) -> ipaddress.IPv4Address | None:
    """The address a host written as an IPv4 number means, in any spelling `inet_aton` accepts
    (dotted with 1–4 parts, each decimal, 0x-hex or 0-octal); None when the host is a name."""
    parts = host.removesuffix(".").split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10) if part.isdigit() else -1)
        except ValueError:
            return None
    if any(v < 0 for v in values):
        return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def literal_address(host: str) -> IPAddress | None:
    """The IP address a URL host spells (IPv6 without brackets, or any IPv4 form), else None."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return ipv4_number(host)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def blocked_reason(ip: IPAddress) -> str | None:
    """Why `ip` is not on the public internet, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            why = blocked_reason(inner)
            return f"an IPv6 form of {inner}, {why}" if why else None
    if ip in _METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a carrier-grade NAT address (100.64.0.0/10)"
    if ip.is_private:
        return "a private-network address"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return "not a public internet address"
    return None


def parse_url(url: str) -> SplitResult:
    """The URL split into parts, or BlockedURL when it is not a plain absolute http(s) URL."""
    if _FORBIDDEN_CHARS.search(url):
        raise BlockedURL("the URL contains whitespace, a backslash or a control character")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise BlockedURL(f"not a valid URL: {exc}") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise BlockedURL(f"only http and https URLs can be fetched, not {parts.scheme or 'a relative URL'!r}")
    if not parts.hostname:
        raise BlockedURL("the URL has no host")
    return parts


class Guard:
    """Checks URLs against the host rules and the private-network rule.

    `allow_private` is the operator's explicit opt-out of the address check (host rules still apply).
    The other arguments are seams for tests: `resolver` replaces DNS (to map a public-looking name to a
    local address), `address_policy` replaces `blocked_reason` (to let one loopback address play a public
    server), `default_ports` the ports of URLs that name none.
    """

    def __init__(self, rules: HostRules | None = None, *, allow_private: bool = False,
                 resolver: Resolver = system_resolver, address_policy: AddressPolicy | None = None,
                 default_ports: dict[str, int] | None = None) -> None:
        self.rules = rules or HostRules()
        self.allow_private = allow_private
        self.resolver = resolver
        self.address_policy = address_policy or blocked_reason
        self.default_ports = default_ports or DEFAULT_PORTS

    def host_of(self, url: str) -> tuple[SplitResult, str]:
        """The parsed URL and its normalised host, after the host rules."""
        parts = parse_url(url)
        raw = parts.hostname or ""
        literal = literal_address(raw.split("%", 1)[0])
        if literal is not None:
            host = str(literal)
        elif _NUMERIC_LABEL.match(raw.removesuffix(".").rsplit(".", 1)[-1]):
            # Browsers read a host ending in a number as an IPv4 address; one that is not valid is refused
            # rather than handed to DNS, where resolvers disagree about it.
            raise BlockedURL(f"{raw!r} is not a valid IPv4 address")
        else:
            try:
                host = normalise_host(raw)
            except ValueError as exc:
                raise BlockedURL(str(exc)) from None
        if literal is None and (host == "localhost" or host.endswith(".localhost")) and not self.allow_private:
            raise BlockedURL(f"{host} is this machine; private and local addresses cannot be fetched")
        why = self.rules.refusal(address_key(literal) if literal is not None else host)
        if why:
            raise BlockedURL(why)
        return parts, host

    async def check(self, url: str) -> Target:
        """The checked target of `url`, or BlockedURL saying why it may not be fetched."""
        parts, host = self.host_of(url)
        port = parts.port or self.default_ports[parts.scheme]
        literal = literal_address(host)
        addresses = [str(literal)] if literal is not None else await self.resolver(host, port)
        if not addresses:
            raise BlockedURL(f"host {host!r} has no address")
        chosen: str | None = None
        for text in addresses:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
            if literal is None and address_key(ip) in self.rules.denied:  # a name for a denied address
                raise BlockedURL(f"{host} resolves to {ip}, which is in denied_hosts")
            why = self.address_policy(ip)
            if why and not self.allow_private:
                shown = host if literal is not None else f"{host} resolves to {ip}, which"
                raise BlockedURL(f"{shown} is {why}; private and internal addresses cannot be fetched")
            chosen = chosen or str(ip)
        assert chosen is not None
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return Target(url=f"{parts.scheme}://{netloc}{target}", scheme=parts.scheme, host=host, port=port,
                      address=chosen, target=target)
