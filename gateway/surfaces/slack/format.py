"""Text between Markdown (what the model writes) and Slack mrkdwn (what Slack renders), both ways.

Slack's markup differs from Markdown in small, visible ways: one asterisk is bold, links are
`<url|text>`, and `&`, `<`, `>` must be escaped or Slack reads them as markup (so the model cannot ping
`<!channel>`). Text keeps Slack's marks apart from its words (`literal`), so what CommonMark reads as
text (an escaped `\\*`, say) is not formatted by Slack either. Code is left alone apart from the escaping
of the three characters, since Slack shows it verbatim. Markdown is parsed once as CommonMark
(gateway/surfaces/markdown.py), so a reply cut mid-stream renders safely.
"""

from __future__ import annotations

import re

from gateway.surfaces.markdown import Renderer
from gateway.surfaces.text import split_text

_MARKS = {"strong": "*", "em": "_", "s": "~", "heading": "*"}
_SLACK_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
# A mark that Slack could pair: one not between two letters or digits (Slack ignores marks inside a word).
_PAIRABLE = re.compile(r"(?<![^\W_])[*_~`]|[*_~`](?![^\W_])")
_ZWSP = "\u200b"


def escape(text: str) -> str:
    """Escape the three characters Slack treats as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def literal(text: str) -> str:
    """Text that shows as written in mrkdwn: the three characters escaped, and each mark Slack could
    pair (`*_~` and a backtick) between two zero-width spaces.

    Slack has no escape for its marks, so a Markdown text node like `*now*` (an email subject in a
    reminder, written `\\*now\\*`) would turn bold. A mark opens only after a word boundary and before
    a non-space, and closes only the other way round; with a zero-width space on both sides one of the
    two fails whichever Slack takes the space for (a boundary: followed by one; a letter: inside a
    word). The spaces are invisible, so the person reads the text as written."""
    return _PAIRABLE.sub(lambda m: f"{_ZWSP}{m[0]}{_ZWSP}", escape(text))


class SlackMrkdwn(Renderer):
    def escape(self, text: str) -> str:
        return literal(text)

    def wrap(self, kind: str, inner: str) -> str:
        if not inner.strip():
            return inner
        mark = _MARKS[kind]
        # Slack has no nesting of one mark in itself (**bold** inside a heading is already bold).
        return f"{mark}{inner.replace(mark, '') if mark == '*' else inner}{mark}"

    def code(self, text: str) -> str:
        return f"`{escape(text)}`"

    def pre(self, text: str, language: str) -> str:
        return f"```{escape(text)}```"

    def link(self, url: str, label: str) -> str:
        safe = escape(url).replace("|", "%7C")
        # An autolink (<https://x.org>) reads the same without a label.
        return f"<{safe}>" if label in (url, escape(url)) else f"<{safe}|{label}>"

    def unfinished(self, text: str) -> str:
        # Slack would pair this fence with the next one it sees; a zero-width space keeps it literal.
        return escape(text).replace("```", "`\u200b`\u200b`")

    def quote(self, inner: str) -> str:
        if not inner.strip():
            return ""
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown as Slack mrkdwn (parsed as CommonMark, see gateway/surfaces/markdown.py)."""
    return SlackMrkdwn(markdown).render()


def mrkdwn_chunks(markdown: str, limit: int) -> list[str]:
    """Render `markdown` as mrkdwn chunks of at most `limit` characters each.

    The Markdown is split (so code fences are closed per chunk) and each chunk rendered; escaping can
    lengthen a chunk past `limit`, in which case the split is redone with a smaller budget."""
    budget = limit
    while True:
        rendered = [to_mrkdwn(chunk) for chunk in split_text(markdown, budget)]
        if budget <= 64 or all(len(r) <= limit for r in rendered):
            return rendered
        budget = budget * 3 // 4


def from_mrkdwn(text: str) -> str:
    """Plain text from an incoming Slack message: links as `label (url)` or the bare URL, entities
    unescaped. User and channel references (`<@U123>`) are kept as they are."""

    def link(m: re.Match[str]) -> str:
        url, label = m.group(1), m.group(2)
        # Slack writes auto-linked addresses as <mailto:a@b.c|a@b.c>, <http://x.org|x.org>: say them once.
        if not label or url.split(":", 1)[1].lstrip("/") == label:
            return label or url
        return f"{label} ({url})"

    text = _SLACK_LINK.sub(link, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
