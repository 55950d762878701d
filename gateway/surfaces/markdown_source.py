"""Markdown shown as its own source, for a surface without markup (the console): the markup as the text
wrote it, and text as CommonMark reads it.

Outside text reaches every surface as CommonMark text, backslash-escaped where it would otherwise be
markup (a reminder line's email subject, see toolsets/schedule_triggers.py): the escapes are what says
"these characters are text", so each surface shows text nodes in its own way (Telegram HTML-escaped,
Slack mrkdwn-guarded, here as they are). Printing the source unparsed would show the backslashes, so the
source is parsed and written back: markup with the markers it was written with, text unescaped.

Written back, not rendered, so a streamed reply keeps growing at its end: markup that closes later reads
the same before and after it closes (`**bo` then `**bold**`), and the console prints only what was added.
"""

from __future__ import annotations

from markdown_it.tree import SyntaxTreeNode

from gateway.surfaces.markdown import Renderer


class MarkdownSource(Renderer):
    """The source of one text, with CommonMark's escapes and entities resolved in its text."""

    def escape(self, text: str) -> str:
        return text

    def wrap(self, kind: str, inner: str) -> str:
        return inner  # every caller is overridden below with the node's own markers

    def code(self, text: str) -> str:
        return f"`{text}`"

    def pre(self, text: str, language: str) -> str:
        return f"```{language}\n{text}\n```"

    def link(self, url: str, label: str) -> str:
        return f"[{label}]({url})"

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def marker(self, item: SyntaxTreeNode, number: int) -> str:
        return f"{number}{item.markup}" if item.markup in (".", ")") else item.markup

    def hanging(self, marker: str) -> str:
        return " " * (len(marker) + 1)  # where CommonMark continues the item

    def block(self, node: SyntaxTreeNode, indent: str) -> str:
        kind = node.type
        if kind == "heading" and node.markup == "#":
            return f"{'#' * int(node.tag[1:])} {self.inline(node)}"
        if kind == "heading":  # setext: the underline as written
            underline = self.lines[node.map[1] - 1].strip() if node.map else node.markup * 3
            return f"{self.inline(node)}\n{underline}"
        if kind == "fence":
            opened = f"{node.markup}{node.info}\n{node.content}"
            return opened + node.markup if self._closed(node) else opened.rstrip("\n")
        if kind == "code_block":
            return "\n".join(f"    {line}" for line in node.content.rstrip("\n").split("\n"))
        if kind in ("hr", "table"):
            return self._source_of(node).strip()
        return super().block(node, indent)

    def span(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind in ("strong", "em", "s"):
            return f"{node.markup}{self.inline(node)}{node.markup}"
        if kind == "code_inline":
            text = node.content
            # CommonMark drops one space each side of a code span; put it back where it was needed.
            pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip()) \
                else ""
            return f"{node.markup}{pad}{text}{pad}{node.markup}"
        if kind == "link" and node.markup == "autolink":
            return f"<{self.inline(node)}>"  # as written: the href is normalised (mailto: added)
        if kind == "link":
            return self.link(str(node.attrs.get("href", "")), self.inline(node))
        if kind == "image":
            return f"![{self.inline(node)}]({node.attrs.get('src', '')})"
        return super().span(node)


def as_source(markdown: str) -> str:
    """`markdown` written back as its source, its text unescaped (see the module's docstring)."""
    return MarkdownSource(markdown).render()
