"""Markdown as the model writes it, parsed once (CommonMark, with GFM strikethrough and tables, through
markdown-it-py) and rendered for a platform by a small `Renderer` subclass (Telegram HTML, Slack mrkdwn).

A parser, not patterns, so that text cut anywhere (a reply streamed into a message) still renders
safely: markup that is not closed yet is not markup in CommonMark, so an unfinished `**bold`, `` `code``
or `[link](https://exa` is plain text until it closes. The one construct CommonMark closes on its own, a
fenced code block running to the end of the text, is rendered as plain text here until its closing fence
arrives, so a code block never swallows the rest of a reply that is still coming. Raw HTML is never
markup (html off): it reaches the platform escaped, as text.

Blocks are separated as the source separated them: a blank line where the model left one, else a line
break, so a heading directly above a list stays directly above it.
"""

from __future__ import annotations

import abc

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
RULE = "———"


class Renderer(abc.ABC):
    """Walks the syntax tree of one text; subclasses supply the platform's markup."""

    def __init__(self, markdown: str) -> None:
        self.source = markdown.replace("\x00", "")
        self.lines = self.source.split("\n")

    def render(self) -> str:
        return self.blocks(SyntaxTreeNode(_PARSER.parse(self.source)).children)

    # -- platform markup ------------------------------------------------------------------------------

    @abc.abstractmethod
    def escape(self, text: str) -> str:
        """Text that must show as written."""

    @abc.abstractmethod
    def wrap(self, kind: str, inner: str) -> str:
        """Inline markup around rendered `inner`: kind is "strong", "em", "s" or "heading"."""

    @abc.abstractmethod
    def code(self, text: str) -> str:
        """An inline code span."""

    @abc.abstractmethod
    def pre(self, text: str, language: str) -> str:
        """A code block (also a table, shown monospaced as written)."""

    @abc.abstractmethod
    def link(self, url: str, label: str) -> str:
        """A link to `url` (an allowed scheme) with rendered `label`."""

    @abc.abstractmethod
    def quote(self, inner: str) -> str:
        """A block quote around rendered `inner`."""

    def unfinished(self, text: str) -> str:
        """A code block whose closing fence has not arrived yet, shown as the plain text it is."""
        return self.escape(text)

    # -- blocks -----------------------------------------------------------------------------------------

    def blocks(self, nodes: list[SyntaxTreeNode], indent: str = "") -> str:
        out: list[str] = []
        previous: SyntaxTreeNode | None = None
        for node in nodes:
            if previous is not None:
                out.append(self._gap(previous, node))
            out.append(self.block(node, indent))
            previous = node
        return "".join(out)

    def block(self, node: SyntaxTreeNode, indent: str) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inline(node)
        if kind == "heading":
            return self.wrap("heading", self.inline(node))
        if kind in ("bullet_list", "ordered_list"):
            return self._list(node, indent)
        if kind == "blockquote":
            return self.quote(self.blocks(node.children))
        if kind == "fence":
            if not self._closed(node):  # still streaming: show what is there, as written
                return self.unfinished(self._source_of(node))
            return self.pre(node.content.rstrip("\n"), node.info.strip().split(" ")[0])
        if kind == "code_block":
            return self.pre(node.content.rstrip("\n"), "")
        if kind == "hr":
            return RULE
        if kind == "table":
            return self.pre(self._source_of(node).strip("\n"), "")
        return self.escape(self._source_of(node))  # nothing else is produced with html off; be safe anyway

    def _list(self, node: SyntaxTreeNode, indent: str) -> str:
        start = int(node.attrs.get("start", 1)) if node.type == "ordered_list" else 1
        items: list[str] = []
        previous: SyntaxTreeNode | None = None
        for number, item in enumerate(node.children, start):
            marker = self.marker(item, number)
            body = self.blocks(item.children, indent + self.hanging(marker))
            gap = self._gap(previous, item) if previous is not None else ""
            items.append(f"{gap}{indent}{marker} {body}")
            previous = item
        return "".join(items)

    def marker(self, item: SyntaxTreeNode, number: int) -> str:
        """A list item's marker: a bullet, or the item's `number`."""
        return f"{number}." if item.markup in (".", ")") else "•"

    def hanging(self, marker: str) -> str:
        """The indent of an item's nested lines under its `marker`."""
        return "  "

    def _gap(self, previous: SyntaxTreeNode, following: SyntaxTreeNode) -> str:
        """A blank line between two blocks if the source had one, else a line break."""
        if previous.map is None or following.map is None:
            return "\n"
        end = previous.map[1]
        while end > previous.map[0] and not self.lines[end - 1].strip():
            end -= 1
        return "\n\n" if following.map[0] > end else "\n"

    def _closed(self, fence: SyntaxTreeNode) -> bool:
        """Whether a fenced block's closing fence is in the text (CommonMark closes it at the end)."""
        if fence.map is None:
            return True
        first, after = fence.map
        last = self.lines[after - 1].strip() if after - 1 > first else ""
        return bool(last) and last.startswith(fence.markup) and set(last) == {fence.markup[0]}

    def _source_of(self, node: SyntaxTreeNode) -> str:
        if node.map is None:
            return node.content
        return "\n".join(self.lines[node.map[0]:node.map[1]]).rstrip("\n")

    # -- inline -----------------------------------------------------------------------------------------

    def inline(self, node: SyntaxTreeNode) -> str:
        return "".join(self.span(child) for child in node.children)

    def span(self, node: SyntaxTreeNode) -> str:
        """One inline node rendered."""
        kind = node.type
        if kind == "inline":
            return self.inline(node)
        if kind == "text":
            return self.escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return self.code(node.content)
        if kind in ("strong", "em", "s"):
            return self.wrap(kind, self.inline(node))
        if kind == "link":
            label = self.inline(node)
            url = str(node.attrs.get("href", ""))
            return self.link(url, label) if url.lower().startswith(LINK_SCHEMES) else label
        if kind == "image":
            alt = self.escape(node.content or str(node.attrs.get("alt", "")) or "image")
            url = str(node.attrs.get("src", ""))
            return self.link(url, alt) if url.lower().startswith(LINK_SCHEMES) else alt
        return self.escape(node.content)
