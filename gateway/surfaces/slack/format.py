"""Text between Markdown (what the model writes) and Slack mrkdwn (what Slack renders), both ways.

Slack's markup differs from Markdown in small, visible ways: one asterisk is bold, links are
`<url|text>`, and `&`, `<`, `>` must be escaped or Slack reads them as markup. Code is left alone apart
from that escaping, since Slack shows it verbatim.
"""

from __future__ import annotations

import re

from gateway.surfaces.text import split_text

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BULLET = re.compile(r"^([ \t]*)[*+-][ \t]+", re.MULTILINE)
_QUOTE = re.compile(r"^&gt;[ \t]?", re.MULTILINE)  # a quote marker, already escaped with everything else
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_ITALIC = re.compile(r"(?<![*\w])\*(?!\s)([^*\n]+?)(?<!\s)\*(?![*\w])")
_STRIKE = re.compile(r"~~(.+?)~~")
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")
_BOLD_MARK = "\x01"  # stands for a converted bold marker while single-asterisk italics are rewritten
_SLACK_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")


def escape(text: str) -> str:
    """Escape the three characters Slack treats as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown as Slack mrkdwn."""
    markdown = markdown.replace("\x00", "").replace(_BOLD_MARK, "")
    out: list[str] = []
    pos = 0
    for fence in _FENCE.finditer(markdown):
        out.append(_inline(markdown[pos:fence.start()]))
        out.append("```" + escape(fence.group(1).rstrip("\n")) + "```")
        pos = fence.end()
    out.append(_inline(markdown[pos:]))
    return "".join(out)


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for code in _INLINE_CODE.finditer(text):
        out.append(_prose(text[pos:code.start()]))
        out.append(escape(code.group(0)))
        pos = code.end()
    out.append(_prose(text[pos:]))
    return "".join(out)


def _prose(text: str) -> str:
    # Links are lifted out first so their URLs escape Slack-style and no emphasis rule touches them.
    links: list[str] = []

    def keep(url: str, label: str | None) -> str:
        safe_url = escape(url).replace("|", "%7C")
        links.append(f"<{safe_url}|{escape(label)}>" if label else f"<{safe_url}>")
        return f"\x00{len(links) - 1}\x00"

    text = _MD_LINK.sub(lambda m: keep(m.group(2), m.group(1)), text)
    text = _AUTOLINK.sub(lambda m: keep(m.group(1), None), text)
    text = escape(text)
    text = _HEADING.sub(lambda m: _BOLD_MARK + _BOLD.sub(r"\1\2", m.group(1)) + _BOLD_MARK, text)
    text = _BULLET.sub(r"\1• ", text)
    text = _QUOTE.sub("> ", text)
    text = _BOLD.sub(lambda m: _BOLD_MARK + (m.group(1) or m.group(2)) + _BOLD_MARK, text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text).replace(_BOLD_MARK, "*")
    return _PLACEHOLDER.sub(lambda m: links[int(m.group(1))], text)


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
