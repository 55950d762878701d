"""Markdown (what the model writes) rendered as Telegram HTML (what the Bot API parses).

Telegram's HTML mode accepts a handful of tags (b, i, s, code, pre, a, blockquote) and requires every
`<`, `>` and `&` outside a tag to be escaped. HTML is the safer target than Telegram's MarkdownV2, whose
long list of reserved characters makes ordinary prose fail to parse. The text is parsed as CommonMark
(gateway/surfaces/markdown.py), so every tag this renders is closed and a reply cut mid-stream renders
valid HTML at every cut; if Telegram still rejects the result, the surface resends as plain text.
"""

from __future__ import annotations

import html

from gateway.surfaces.markdown import Renderer

_TAGS = {"strong": "b", "em": "i", "s": "s", "heading": "b"}


def escape(text: str) -> str:
    """Escape text for Telegram HTML (quotes too, so the result is also safe inside an attribute)."""
    return html.escape(text, quote=True)


class TelegramHtml(Renderer):
    def escape(self, text: str) -> str:
        return escape(text)

    def wrap(self, kind: str, inner: str) -> str:
        tag = _TAGS[kind]
        return f"<{tag}>{inner}</{tag}>"

    def code(self, text: str) -> str:
        return f"<code>{escape(text)}</code>"

    def pre(self, text: str, language: str) -> str:
        if language:
            return f'<pre><code class="language-{escape(language)}">{escape(text)}</code></pre>'
        return f"<pre>{escape(text)}</pre>"

    def link(self, url: str, label: str) -> str:
        return f'<a href="{escape(url)}">{label}</a>'

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>" if inner.strip() else ""


def to_html(markdown: str) -> str:
    """Render Markdown as Telegram HTML: emphasis, code spans, code blocks, links, headings (bold),
    lists, block quotes, rules and tables (monospaced); everything else is escaped text."""
    return TelegramHtml(markdown).render()
