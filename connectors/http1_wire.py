"""The bytes of HTTP/1.1 (RFC 9112) a client writes and reads, without any I/O: the request head, the
parsing of a response head, and how the response's body is framed.

Every function raises ValueError for bytes that break the protocol; the transport (connectors/http1.py)
turns that into httpx.RemoteProtocolError or LocalProtocolError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

Headers = list[tuple[bytes, bytes]]

CHUNKED = -1  # the body is in chunks, ended by a zero-size one
UNTIL_CLOSE = -2  # the body runs to the end of the connection

_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_NO_BODY_STATUS = frozenset({204, 304})


def request_head(method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The request line and header fields, through the blank line. Raises ValueError for a line break
    inside a name or a value, which would let a header value smuggle a second request."""
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    count = 0
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
        count += 1
    lines.append(b"\r\n")
    head = b"".join(lines)
    if head.count(b"\n") != count + 2 or head.count(b"\r") != count + 2:
        raise ValueError("a request header contains a line break")
    return head


def parse_head(data: bytes) -> tuple[bytes, int, bytes, Headers]:
    """The HTTP version, status, reason phrase and header fields of a response head (which ends with
    the blank line). An obsolete folded line continues the field before it."""
    lines = data.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise ValueError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    headers: Headers = []
    for line in lines[1:]:
        if not line:
            continue  # the blank line that ends the head
        if line[0] in b" \t":
            if not headers:
                raise ValueError("a response head starts with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name or name.strip(b" \t") != name or b" " in name:
            raise ValueError(f"a malformed response header line: {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return version, int(code), reason, headers


def body_length(method: bytes, status: int, headers: Headers) -> int:
    """How the response's body is framed: its length in bytes, CHUNKED or UNTIL_CLOSE."""
    if method == b"HEAD" or status in _NO_BODY_STATUS or status < 200:
        return 0
    lengths: set[bytes] = set()
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            # A Transfer-Encoding overrides any Content-Length; only a final chunked coding frames the body.
            return CHUNKED if value.lower().rsplit(b",", 1)[-1].strip() == b"chunked" else UNTIL_CLOSE
        if lowered == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
    if not lengths:
        return UNTIL_CLOSE
    if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
        raise ValueError(f"an invalid Content-Length: {b', '.join(sorted(lengths))[:80]!r}")
    return int(lengths.pop())


def keeps_alive(version: bytes, headers: Headers) -> bool:
    """Whether the connection may carry another request after this response."""
    if version != b"HTTP/1.1":
        return False
    return not any(name.lower() == b"connection" and b"close" in value.lower() for name, value in headers)


def chunk_size(line: bytes) -> int:
    """The size in a chunk's size line (ending with CRLF); a chunk extension after `;` is ignored."""
    size = line[:-2].split(b";", 1)[0].strip(b" \t")
    if not _CHUNK_SIZE.fullmatch(size):
        raise ValueError(f"a malformed chunk size line: {line[:80]!r}")
    return int(size, 16)


def chunked(body: bytes) -> bytes:
    """`body` as a chunked request body: one chunk, then the last."""
    return b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
