"""A fetched body as text a model can read, by content type.

HTML becomes readable Markdown (trafilatura: the main content with headings, lists, tables and links,
without navigation and footers; see docs/web.md for why this extractor); text, JSON and XML are returned
as they are; PDF becomes its text (pypdf); any other type is refused with an error naming it. The
conversions are CPU-bound and synchronous: callers run `readable` in a worker thread.
"""

from __future__ import annotations

import codecs
import io
from dataclasses import dataclass

_HTML = {"text/html", "application/xhtml+xml"}
_TEXT_APPLICATION = {"application/json", "application/xml", "application/javascript", "application/x-ndjson",
                     "application/yaml", "application/toml"}
_SNIFF_BYTES = 512


class UnsupportedContent(Exception):
    """The body cannot be turned into text; the message names the type."""


@dataclass(frozen=True)
class Readable:
    kind: str  # "html", "text" or "pdf"
    text: str
    title: str | None = None


def media_type(content_type: str) -> tuple[str, str | None]:
    """The lower-cased media type and the charset parameter of a Content-Type header."""
    kind, _, params = content_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip().strip('"')
    return kind.strip().lower(), charset


def _sniff(body: bytes) -> str:
    head = body[:_SNIFF_BYTES].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    if b"\x00" not in head:
        try:
            body[:_SNIFF_BYTES * 8].decode("utf-8")
            return "text"
        except UnicodeDecodeError as exc:
            if exc.start >= len(body[:_SNIFF_BYTES * 8]) - 4:  # a character cut at the sniff boundary
                return "text"
    return "binary"


def kind_of(content_type: str, body: bytes) -> str:
    """"html", "text", "pdf", or "binary" for a body with this Content-Type header."""
    kind, _ = media_type(content_type)
    if kind in _HTML:
        return "html"
    if kind == "application/pdf":
        return "pdf"
    if kind.startswith("text/") or kind in _TEXT_APPLICATION or kind.endswith(("+json", "+xml")):
        return "text"
    if kind in ("", "application/octet-stream", "binary/octet-stream"):
        return _sniff(body)
    return "binary"


def _decode(body: bytes, charset: str | None) -> str:
    if charset:
        try:
            codecs.lookup(charset)
            return body.decode(charset, errors="replace")
        except LookupError:
            pass  # an unknown charset label: fall back to UTF-8
    return body.decode("utf-8", errors="replace")


def _clean_title(title: object) -> str | None:
    """A title on one line, or None when there is none."""
    text = " ".join(str(title).split()) if title else ""
    return text or None


def _html_title(body: bytes) -> str | None:
    import lxml.html  # with the page: the fetcher is built at start-up, and lxml is not needed before

    try:
        title = lxml.html.document_fromstring(body).findtext(".//title")
    except Exception:  # lxml raises several types for unparsable markup; the title is optional
        return None
    return _clean_title(title)


def extractor_problem() -> str | None:
    """Why HTML pages cannot be made readable in this installation (a part of trafilatura's chain that
    pip did not install), or None. Blocking (the imports take about a second): run it in a thread."""
    try:
        _html(b"<html><head><title>t</title></head><body><p>A paragraph.</p></body></html>", "https://example.org/")
    except ImportError as exc:
        return f"{exc} (pip install lxml_html_clean, or a newer pip and reinstall Anyy)"
    return None


def _html(body: bytes, url: str) -> Readable:
    # trafilatura and its dependencies take ~1 s to import: loaded on the first page, not at start-up.
    import trafilatura

    markdown = trafilatura.extract(body, url=url, output_format="markdown", include_links=True,
                                   include_tables=True, include_formatting=True, include_comments=False,
                                   favor_recall=True)
    if not markdown:  # no main content found (a bare page, a portal): its plain text instead
        markdown = trafilatura.html2txt(body) or ""
    return Readable("html", markdown.strip(), _html_title(body))


def _pdf(body: bytes, complete: bool, max_bytes: int) -> Readable:
    if not complete:
        raise UnsupportedContent(f"the PDF is larger than the {max_bytes}-byte limit and cannot be read in part")
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata else None
    except (PdfReadError, ValueError, KeyError) as exc:
        raise UnsupportedContent(f"application/pdf that cannot be read: {exc}") from None
    text = "\n\n".join(f"[page {i}]\n{t.strip()}" for i, t in enumerate(pages, 1) if t.strip())
    return Readable("pdf", text or "(the PDF has no extractable text; it may be scanned images)", _clean_title(title))


def readable(content_type: str, body: bytes, *, url: str, complete: bool = True, max_bytes: int = 0) -> Readable:
    """The body as text; `complete` is False when it was cut at `max_bytes`. Raises UnsupportedContent."""
    kind = kind_of(content_type, body)
    if kind == "html":
        return _html(body, url)
    if kind == "pdf":
        return _pdf(body, complete, max_bytes)
    if kind == "text":
        return Readable("text", _decode(body, media_type(content_type)[1]))
    named = media_type(content_type)[0] or "unlabelled binary data"
    raise UnsupportedContent(f"the URL serves {named}, which is not text, HTML or PDF and cannot be read")
