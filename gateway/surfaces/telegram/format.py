"""Markdown (what the model writes) rendered as Telegram HTML (what the Bot API parses).

Telegram's HTML mode accepts a handful of tags (b, i, s, code, pre, a, blockquote) and requires every
`<`, `>` and `&` outside a tag to be escaped. HTML is the safer target than Telegram's MarkdownV2, whose
long list of reserved characters makes ordinary prose fail to parse. Markup the converter cannot pair
up is left as literal text; if Telegram still rejects the result, the surface resends as plain text.
"""

from __future__ import annotations

import html
import re

_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[ \t]*$")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[*+-][ \t]+(.*)$")
_RULE = re.compile(r"^[ \t]*([-*_])([ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^[ \t]*>[ \t]?(.*)$")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")
# Emphasis, applied in this order so `***` is taken before `**` and `**` before `*`; single `_` only at
# word edges, so snake_case identifiers stay as they are.
_EMPHASIS = (
    (re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*"), r"<b><i>\1</i></b>"),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), r"<b>\1</b>"),
    (re.compile(r"__(?=\S)(.+?)(?<=\S)__"), r"<b>\1</b>"),
    (re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])"), r"<i>\1</i>"),
    (re.compile(r"(?<![_\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\w])"), r"<i>\1</i>"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"<s>\1</s>"),
)


def escape(text: str) -> str:
    """Escape text for Telegram HTML (quotes too, so the result is also safe inside an attribute)."""
    return html.escape(text, quote=True)


def to_html(markdown: str) -> str:
    """Render Markdown as Telegram HTML: emphasis, code spans, fenced code, links, headings (bold),
    bullets, block quotes and rules; everything else is escaped text."""
    lines = markdown.replace("\x00", "").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        fence = _FENCE_OPEN.match(lines[i])
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if _FENCE_CLOSE.match(lines[j])), len(lines))
            out.append(_pre("\n".join(lines[i + 1:end]), fence.group(1)))
            i = end + 1
            continue
        if _QUOTE.match(lines[i]):
            quoted: list[str] = []
            while i < len(lines) and (m := _QUOTE.match(lines[i])):
                quoted.append(_inline(m.group(1)))
                i += 1
            out.append("<blockquote>" + "\n".join(quoted) + "</blockquote>")
            continue
        out.append(_line(lines[i]))
        i += 1
    return "\n".join(out)


def _pre(code: str, language: str) -> str:
    if language:
        return f'<pre><code class="language-{escape(language)}">{escape(code)}</code></pre>'
    return f"<pre>{escape(code)}</pre>"


def _line(line: str) -> str:
    if _RULE.match(line):
        return "———"
    if heading := _HEADING.match(line):
        return f"<b>{_inline(heading.group(1))}</b>"
    if bullet := _BULLET.match(line):
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    """One line of prose. Code spans and links are lifted out behind placeholders first, so emphasis
    never reaches inside them but may still wrap around them."""
    lifted: list[str] = []

    def lift(rendered: str) -> str:
        lifted.append(rendered)
        return f"\x00{len(lifted) - 1}\x00"

    def restore(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: lifted[int(m.group(1))], text)

    def link(m: re.Match[str]) -> str:
        label, url = m.group(1), m.group(2)
        if not url.lower().startswith(_LINK_SCHEMES):
            return m.group(0)  # not a link Telegram would open: keep the text as written
        return lift(f'<a href="{escape(url)}">{restore(_emphasis(escape(label)))}</a>')

    text = _CODE_SPAN.sub(lambda m: lift(f"<code>{escape(m.group(1))}</code>"), text)
    text = _LINK.sub(link, text)
    return restore(_emphasis(escape(text)))


def _emphasis(escaped: str) -> str:
    for pattern, replacement in _EMPHASIS:
        escaped = pattern.sub(replacement, escaped)
    return escaped
