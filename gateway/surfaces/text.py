"""Platform-neutral text helpers for surfaces: splitting long replies at sensible boundaries."""

from __future__ import annotations


def split_text(text: str, limit: int, *, verbatim: bool = False) -> list[str]:
    """Split `text` into chunks of at most `limit` characters, preferring paragraph breaks, then line
    breaks, then sentence ends, then spaces; a single unbroken run longer than `limit` is cut hard.
    Fenced code blocks cut across chunks are closed and reopened so each chunk renders on its own,
    unless `verbatim` (preformatted text is shown as written, so nothing is added to it)."""
    if limit < 16:
        raise ValueError("limit too small")
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _best_cut(rest, limit - 4)  # room to close a code fence
        chunk, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n")
        if not verbatim and chunk.count("```") % 2 == 1:
            chunk += "\n```"
            rest = "```\n" + rest
        chunks.append(chunk)
    if rest.strip() or not chunks:
        chunks.append(rest)
    return chunks


def _best_cut(text: str, limit: int) -> int:
    window = text[:limit]
    for sep in ("\n\n", "\n", ". ", "。", "! ", "? ", " "):
        pos = window.rfind(sep)
        if pos >= limit // 2:
            return pos + len(sep)
    return limit
