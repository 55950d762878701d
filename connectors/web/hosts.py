"""Host rules for web fetches: `allowed_hosts` and `denied_hosts` patterns.

A pattern is a host name (`example.com`: that host only) or `*.` and a host name (`*.example.com`: its
subdomains at any depth, not `example.com` itself). Patterns and URL hosts
are compared lower-cased and IDNA-encoded (`Bücher.example` matches `xn--bcher-kva.example`), and a URL's
host is the one after any `user@` part. An IP address may be listed as a host too; addresses are compared
as addresses, an IPv4-mapped IPv6 address (`::ffff:127.0.0.2`, in any spelling) as the IPv4 address it
maps, so `denied_hosts = ["127.0.0.2"]` also refuses `http://[::ffff:7f00:2]/`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def normalise_host(host: str) -> str:
    """`host` lower-cased, IDNA-encoded and without a trailing dot; ValueError when it is not a
    valid host name."""
    name = host.strip().removesuffix(".").lower()
    if not name:
        raise ValueError("the host name is empty")
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{host!r} is not a valid host name") from None
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise ValueError(f"{host!r} is not a valid host name")
    return name


def address_key(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The form host rules compare an address in: IPv4-mapped IPv6 as its IPv4 address, else canonical."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def normalise_pattern(pattern: str) -> str:
    """A host pattern in canonical form; ValueError naming the problem."""
    wildcard = pattern.startswith("*.")
    body = pattern[2:] if wildcard else pattern
    if "*" in body:
        raise ValueError(f"{pattern!r}: a '*' may only start a pattern, as in '*.example.com'")
    if not wildcard:
        try:
            return address_key(ipaddress.ip_address(body.strip("[]")))
        except ValueError:
            pass  # a host name
    return ("*." if wildcard else "") + normalise_host(body)


def matches(pattern: str, host: str) -> bool:
    """Whether the normalised `host` matches the normalised `pattern`."""
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


class HostRules:
    """Denied hosts are refused; when `allowed` is non-empty, only hosts it matches are fetched."""

    def __init__(self, allowed: Sequence[str] = (), denied: Sequence[str] = ()) -> None:
        self.allowed = [normalise_pattern(p) for p in allowed]
        self.denied = [normalise_pattern(p) for p in denied]

    def refusal(self, host: str) -> str | None:
        """Why the normalised `host` may not be fetched, or None."""
        denied = next((p for p in self.denied if matches(p, host)), None)
        if denied:
            return f"{host} is in denied_hosts ({denied})"
        if self.allowed and not any(matches(p, host) for p in self.allowed):
            return f"{host} is not in allowed_hosts ({', '.join(self.allowed)})"
        return None
