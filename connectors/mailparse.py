"""Reading mail: RFC 822 bytes from IMAP into plain records (headers, readable text, attachment facts).

The stdlib `email` package with `policy.default` does the MIME work (multipart, encoded words,
quoted-printable, base64, charsets). What it does not do is turn an HTML-only message into text a person
or a model can read, so `html_to_text` does that with the stdlib HTML parser.
"""

from __future__ import annotations

import re
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser

from pydantic import BaseModel, Field

SNIPPET_CHARS = 160

_MSGID = re.compile(r"<[^<>\s]+>")
_BLOCKS = {"p", "div", "br", "tr", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
           "pre", "hr", "section", "article", "header", "footer", "li", "caption", "dt", "dd"}
_CELLS = {"td", "th"}  # kept apart on their line: "Monday | Lentil soup", never "MondayLentil soup"
_SKIP = {"script", "style", "head", "title", "noscript", "template"}


class AttachmentInfo(BaseModel):
    """An attachment's facts; its content stays on the server."""

    filename: str
    content_type: str
    size: int


class MailSummary(BaseModel):
    """One line of a search result."""

    uid: int
    date: str
    sender: str
    subject: str
    snippet: str
    unseen: bool = False


class MailMessage(BaseModel):
    """A whole message, decoded: the headers that matter, the readable text, attachment facts."""

    uid: int
    folder: str
    message_id: str = ""
    in_reply_to: str = ""
    references: list[str] = Field(default_factory=list)
    date: str = ""
    sender: str = ""
    reply_to: str = ""
    to: str = ""
    cc: str = ""
    subject: str = ""
    text: str = ""
    attachments: list[AttachmentInfo] = Field(default_factory=list)
    unseen: bool = False


class _TextExtractor(HTMLParser):
    """Collects the visible text of an HTML document, keeping block structure as line breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0
        self._href: str | None = None
        self._link_text: list[str] = []
        self._cells = 0  # cells begun in the current table row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip_depth += 1
        elif tag in _BLOCKS:
            self.parts.append("\n- " if tag == "li" else "\n")
            if tag == "tr":
                self._cells = 0
        elif tag in _CELLS:
            if self._cells:
                self.parts.append(" | ")
            self._cells += 1
        elif tag == "a":
            self._href = dict(attrs).get("href")
            self._link_text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCKS and tag not in ("li", "tr"):  # the next item's start already breaks the line
            self.parts.append("\n")
        elif tag == "a" and self._href:
            # Keep the target: in mail the link is often the whole point ("confirm here").
            if self._href.startswith(("http:", "https:")) and self._href != "".join(self._link_text).strip():
                self.parts.append(f" ({self._href})")
            self._href = None

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        self.parts.append(data)
        if self._href is not None:
            self._link_text.append(data)


def html_to_text(html: str) -> str:
    """Readable plain text from HTML: scripts and styles dropped, blocks on their own lines."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _decoded(part: Message) -> str:
    """A text part's content as str, surviving unknown charsets and broken encodings."""
    try:
        content = part.get_content()  # type: ignore[attr-defined]
        if isinstance(content, str):
            return content
    except (LookupError, UnicodeError, KeyError):
        pass  # an unknown or lying charset: decode the bytes ourselves below
    payload = part.get_payload(decode=True) or b""
    assert isinstance(payload, bytes)
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:
        return payload.decode("latin-1")


def _body(msg: EmailMessage) -> tuple[str, Message | None]:
    """The readable text of a message and the part it came from (plain preferred over HTML)."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return "", None
    text = _decoded(part)
    if part.get_content_subtype() == "html":
        text = html_to_text(text)
    return text.replace("\r\n", "\n").strip(), part


def _attachments(msg: EmailMessage, body: Message | None) -> list[AttachmentInfo]:
    found: list[AttachmentInfo] = []
    for part in msg.walk():
        if part.is_multipart() or part is body:
            continue
        filename = part.get_filename()
        if not filename and part.get_content_disposition() != "attachment":
            continue
        payload = part.get_payload(decode=True)
        found.append(AttachmentInfo(filename=filename or "(unnamed)", content_type=part.get_content_type(),
                                    size=len(payload) if isinstance(payload, bytes) else 0))
    return found


def _header(msg: Message, name: str) -> str:
    value = msg.get(name)
    return " ".join(str(value).split()) if value is not None else ""


def _date(msg: Message) -> str:
    raw = _header(msg, "Date")
    try:
        return parsedate_to_datetime(raw).isoformat()
    except (TypeError, ValueError, IndexError):
        return raw


def message_ids(text: str) -> list[str]:
    """The `<id>` tokens of a Message-ID, In-Reply-To or References header, in order."""
    return _MSGID.findall(text)


def _parse(raw: bytes) -> EmailMessage:
    msg = message_from_bytes(raw, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def parse_message(uid: int, folder: str, raw: bytes, *, unseen: bool = False) -> MailMessage:
    """Decode a full RFC 822 message."""
    msg = _parse(raw)
    text, body = _body(msg)
    ids = message_ids(_header(msg, "Message-ID"))
    reply_ids = message_ids(_header(msg, "In-Reply-To"))
    return MailMessage(
        uid=uid, folder=folder, message_id=ids[0] if ids else "", in_reply_to=reply_ids[0] if reply_ids else "",
        references=message_ids(_header(msg, "References")), date=_date(msg), sender=_header(msg, "From"),
        reply_to=_header(msg, "Reply-To"), to=_header(msg, "To"), cc=_header(msg, "Cc"),
        subject=_header(msg, "Subject"), text=text, attachments=_attachments(msg, body), unseen=unseen)


def summarize(uid: int, raw: bytes, *, unseen: bool = False) -> MailSummary:
    """A search-result line from a message, or from just its first bytes (a truncated tail is harmless)."""
    msg = _parse(raw)
    text, _ = _body(msg)
    snippet = " ".join(text.split())
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[: SNIPPET_CHARS - 1].rstrip() + "…"
    return MailSummary(uid=uid, date=_date(msg), sender=_header(msg, "From"), subject=_header(msg, "Subject"),
                       snippet=snippet, unseen=unseen)
