"""What a mail trigger's filters read from a message's headers: the sender's address, whether it matches
an address or ``*@domain`` pattern, and whether the receiving server verified it.

Verification trusts only Authentication-Results headers (RFC 8601) whose authserv-id is the one the
account's receiving server writes (configured per account): a header with any other id, or any header
at all when the receiving server adds none, may be the sender's own forgery. Of the trusted ones the
topmost counts (the receiving server adds its own above everything the message arrived with). It passes
on ``dmarc=pass``, or on ``dkim=pass`` whose signing domain (``header.d``) is aligned with the From
domain: equal to it, or one a parent of the other (DMARC's relaxed alignment, without the public suffix
list: a parent the signer controls is its own organization). With no authserv-id configured nothing is
verified.
"""

from __future__ import annotations

import re
from email.message import Message
from email.utils import getaddresses

_COMMENT = re.compile(r"\([^()]*\)")
_PROPERTY = re.compile(r"([\w.-]+)\s*=\s*\"?([^\s\";]+)\"?")


def sender_address(msg: Message) -> str:
    """The From address, lowercased ('' when there is none or several)."""
    found = [addr for _name, addr in getaddresses(msg.get_all("From") or []) if addr]
    return found[0].lower() if len(found) == 1 else ""


def sender_matches(address: str, patterns: list[str]) -> bool:
    """Whether `address` is one of `patterns` (addresses, or ``*@domain`` for any address at that domain)."""
    if not address or "@" not in address:
        return False
    domain = address.rsplit("@", 1)[1]
    return any(address == p or (p.startswith("*@") and domain == p[2:]) for p in patterns)


def _aligned(signer: str, domain: str) -> bool:
    signer, domain = signer.lower().rstrip("."), domain.lower().rstrip(".")
    if "." not in signer or "." not in domain:
        return False
    return signer == domain or domain.endswith("." + signer) or signer.endswith("." + domain)


def sender_verified(msg: Message, auth_serv_id: str) -> bool:
    """Whether the topmost Authentication-Results from `auth_serv_id` says DMARC passed, or DKIM passed
    aligned with From (False when `auth_serv_id` is empty or no header carries it)."""
    address = sender_address(msg)
    if not address or not auth_serv_id:
        return False
    domain = address.rsplit("@", 1)[1]
    for header in msg.get_all("Authentication-Results") or []:
        parts = _COMMENT.sub(" ", " ".join(str(header).split())).split(";")
        # The authserv-id may carry a version ("mx.example.org 1"); compared without it, case-insensitively.
        served_by = (parts[0].split() or [""])[0].lower().rstrip(".")
        if served_by == auth_serv_id.lower().rstrip("."):
            return any(_passes(resinfo, domain) for resinfo in parts[1:])
    return False


def _passes(resinfo: str, domain: str) -> bool:
    props = dict((k.lower(), v) for k, v in _PROPERTY.findall(resinfo))
    if props.get("dmarc", "").lower() == "pass":
        claimed = props.get("header.from")
        if claimed is None or claimed.lower().rstrip(".") == domain:
            return True
    if props.get("dkim", "").lower() == "pass":
        signer = props.get("header.d") or props.get("header.i", "").rsplit("@", 1)[-1]
        if signer and _aligned(signer, domain):
            return True
    return False
