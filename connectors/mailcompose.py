"""Writing mail: a validated outgoing message and the exact RFC 822 email it becomes.

An `OutgoingMessage` is what a draft stores and what an approval binds: every field the recipient will
see, plus the Message-ID fixed when the draft was made, so the email sent after approval is the email
that was shown.
"""

from __future__ import annotations

import re
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Pragmatic addr-spec check: one @, a dotted domain whose top label is letters (or punycode), no spaces or
# doubled dots.
# Letters beyond ASCII are allowed (internationalized addresses); anything malformed is refused.
_LOCAL = r"[\w.!#$%&'*+/=?^`{|}~-]+"
_DOMAIN = r"(?:[^\W_](?:[\w-]*[^\W_])?\.)+(?:[^\W\d_]{2,}|xn--[^\W_][\w-]*)"
_ADDR_SPEC = re.compile(rf"^{_LOCAL}@{_DOMAIN}$")
_REPLY_PREFIX = re.compile(r"^\s*(re|aw|sv|回复|答复)\s*(\[\d+\])?\s*[:：]", re.IGNORECASE)


def parse_addresses(text: str) -> list[str]:
    """Split one header-style string into normalized addresses ("Name <a@b.org>" or "a@b.org").

    Raises ValueError naming the offending text when any address is malformed.
    """
    found = getaddresses([text])
    if not text.strip() or not found:
        raise ValueError(f"not an email address: {text!r}")
    out = []
    for name, addr in found:
        addr = addr.strip()
        local, _, domain = addr.rpartition("@")
        # The stdlib parser glues words together ("bob@exa mple.com"); the address must appear as written.
        if (not _ADDR_SPEC.match(addr) or addr not in text or ".." in addr or local.startswith(".")
                or local.endswith(".")):
            raise ValueError(f"not a valid email address: {text!r}")
        out.append(str(Address(display_name=name.strip(), username=local, domain=domain)))
    return out


def address_spec(address: str) -> str:
    """The bare `local@domain` of a normalized address."""
    return getaddresses([address])[0][1]


def reply_subject(subject: str) -> str:
    """`Re: subject`, without stacking a second prefix on an existing reply subject."""
    subject = " ".join(subject.split())
    return subject if _REPLY_PREFIX.match(subject) else f"Re: {subject}"


def new_message_id(from_address: str) -> str:
    """A fresh globally unique Message-ID in the sender's domain (no DNS lookup of our own host)."""
    return make_msgid(domain=address_spec(from_address).rpartition("@")[2] or "localhost")


def _address(text: str) -> Address:
    name, addr = getaddresses([text])[0]
    local, _, domain = addr.rpartition("@")
    return Address(display_name=name, username=local, domain=domain)


class OutgoingMessage(BaseModel):
    """A complete outgoing email. Construction validates every address; it is immutable once built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str
    from_address: str
    from_name: str = ""
    to: list[str] = Field(default_factory=list)
    cc: list[str] = Field(default_factory=list)
    bcc: list[str] = Field(default_factory=list)
    subject: str
    body: str
    in_reply_to: str = ""
    references: list[str] = Field(default_factory=list)

    @field_validator("to", "cc", "bcc", mode="before")
    @classmethod
    def _recipients(cls, value: object) -> list[str]:
        items = [value] if isinstance(value, str) else list(value or [])  # type: ignore[call-overload]
        return [addr for item in items if str(item).strip() for addr in parse_addresses(str(item))]

    @field_validator("from_address")
    @classmethod
    def _sender(cls, value: str) -> str:
        (addr,) = parse_addresses(value)
        return address_spec(addr)

    @field_validator("subject")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return " ".join(value.split())  # a newline in a header would be header injection

    @model_validator(mode="after")
    def _has_recipient(self) -> OutgoingMessage:
        if not (self.to or self.cc or self.bcc):
            raise ValueError("the message has no recipients (give at least one address in to, cc or bcc)")
        return self

    @property
    def sender(self) -> str:
        return str(Address(display_name=self.from_name, addr_spec=self.from_address))

    def preview(self) -> str:
        """What a person approves: every recipient, the subject and the whole body."""
        lines = [f"From: {self.sender}", f"To: {', '.join(self.to) or '-'}"]
        lines += [f"Cc: {', '.join(self.cc)}"] if self.cc else []
        lines += [f"Bcc: {', '.join(self.bcc)}"] if self.bcc else []
        lines += [f"Subject: {self.subject}", "", self.body]
        return "\n".join(lines)

    def build(self, when: datetime) -> EmailMessage:
        """The RFC 822 email. Bcc is kept as a header for the Sent copy; SMTP sending strips it."""
        msg = EmailMessage()
        msg["From"] = _address(self.sender)
        for header, addrs in (("To", self.to), ("Cc", self.cc), ("Bcc", self.bcc)):
            if addrs:
                msg[header] = [_address(a) for a in addrs]
        msg["Subject"] = self.subject
        msg["Date"] = format_datetime(when)
        msg["Message-ID"] = self.message_id
        if self.in_reply_to:
            msg["In-Reply-To"] = self.in_reply_to
        if self.references:
            msg["References"] = " ".join(self.references)
        msg.set_content(self.body)
        return msg
