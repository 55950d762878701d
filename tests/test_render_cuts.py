"""The Markdown renderers at every cut of a streamed reply: each prefix of a sample reply renders as
valid Telegram HTML and valid Slack mrkdwn, and unfinished markup (a code block, a link) is plain text
until it closes."""

from __future__ import annotations

import re

import pytest

from gateway.surfaces.slack.format import to_mrkdwn
from gateway.surfaces.telegram.format import to_html
from tests.support import telegram_wire as wire

SAMPLE = """# Plan for *Monday* & after

Here is **what I found** about `a < b`, see [the docs](https://example.org/a?b=1&c=2) or <https://x.org>.

1. First, ~~delete~~ *keep* the file `notes_v2.txt`
2. Then run:
   - `make test` & wait
   - check **bold _nested_ text**

```python
if a < b and c > d:
    print("&amp; is not an entity here")
```

> A quote with a [link](https://q.example/"x") and **bold**
> across two lines

| name | size |
|------|------|
| a<b  | 3 & 4 |

Raw <b>html</b> and <!channel> stay text; done."""

_SLACK_LINK = re.compile(r"<(?:https?|mailto):[^|<>\s]+(?:\|[^<>]*)?>")
_SLACK_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")
_SLACK_QUOTE = re.compile(r"^> ", re.MULTILINE)


def assert_valid_mrkdwn(text: str) -> None:
    """Slack reads `<...>` as links or mentions and `&` as an entity: only our links may hold them."""
    stray = _SLACK_QUOTE.sub("", _SLACK_LINK.sub("", text))
    assert "<" not in stray and ">" not in stray, text
    assert not _SLACK_ENTITY.search(text), text
    assert text.count("```") % 2 == 0, text


def test_every_cut_renders_valid_telegram_html() -> None:
    for cut in range(len(SAMPLE) + 1):
        prefix = SAMPLE[:cut]
        try:
            wire.visible_text(to_html(prefix)) if prefix.strip() else None
        except wire.ParseError as exc:
            pytest.fail(f"cut at {cut} ({prefix[-20:]!r}): {exc}")


def test_every_cut_renders_valid_slack_mrkdwn() -> None:
    for cut in range(len(SAMPLE) + 1):
        assert_valid_mrkdwn(to_mrkdwn(SAMPLE[:cut]))


def test_whole_sample_renders_every_construct() -> None:
    out = to_html(SAMPLE)
    for piece in ("<b>Plan for <i>Monday</i> &amp; after</b>", "<b>what I found</b>", "<code>a &lt; b</code>",
                  '<a href="https://example.org/a?b=1&amp;c=2">the docs</a>', '<a href="https://x.org">',
                  "1. First, <s>delete</s> <i>keep</i>", "  • <code>make test</code> &amp; wait",
                  '<pre><code class="language-python">if a &lt; b and c &gt; d:', "&amp;amp; is not",
                  "<blockquote>A quote with a", "| a&lt;b  | 3 &amp; 4 |", "Raw &lt;b&gt;html&lt;/b&gt;"):
        assert piece in out, piece
    slack = to_mrkdwn(SAMPLE)
    for piece in ("*Plan for _Monday_ &amp; after*", "<https://example.org/a?b=1&amp;c=2|the docs>",
                  "<https://x.org>", "~delete~ _keep_", "```if a &lt; b", "> across two lines", "&lt;!channel&gt;"):
        assert piece in slack, piece


def test_unfinished_code_block_is_plain_text_until_it_closes() -> None:
    opened = SAMPLE.index("```python")
    closing = SAMPLE.index("```\n\n>") + 3
    for cut in range(opened + 10, closing):
        html = to_html(SAMPLE[:cut])
        assert "<pre>" not in html and "```python" in html
        assert to_mrkdwn(SAMPLE[:cut]).count("```") == 0
    assert '<pre><code class="language-python">' in to_html(SAMPLE[:closing])
    # The rest of the reply below an open fence is not swallowed into code.
    assert to_html("```\ncode\n\nmore text") == "```\ncode\n\nmore text"


def test_unfinished_link_is_plain_text_until_it_closes() -> None:
    text = "see [the docs](https://example.org/page) now"
    for cut in range(len("see [t"), text.index(")") + 1):
        assert "<a " not in to_html(text[:cut]) and "|" not in to_mrkdwn(text[:cut])
    assert to_html(text) == 'see <a href="https://example.org/page">the docs</a> now'
    assert to_mrkdwn(text) == "see <https://example.org/page|the docs> now"


def test_unfinished_emphasis_is_literal_until_it_closes() -> None:
    assert wire.visible_text(to_html("this is **very")) == "this is **very"
    assert to_html("this is **very** nice") == "this is <b>very</b> nice"
    # Slack would pair a lone backtick with a later one: text's marks stay between zero-width spaces.
    assert to_mrkdwn("a `code") == "a \u200b`\u200bcode"
