"""What the fake Telegram Bot API says and checks: Bot API JSON objects (users, chats, messages with
their entities, callback queries) and Telegram's HTML parse mode, which the fake enforces as strictly as
Telegram so a rendering mistake fails a test. The server and its fixtures are in tests/fixtures/telegram.py.
"""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser
from typing import Any

# Tags Telegram's HTML parse mode accepts.
ALLOWED_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "span",
                "tg-spoiler", "tg-emoji", "blockquote"}
_TAG = re.compile(r"</?[a-zA-Z][\w-]*(?:\s[^<>]*)?>")
_BARE_AMPERSAND = re.compile(r"&(?!(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);)")
_MENTION = re.compile(r"(?<!\w)@\w{3,}")
_COMMAND = re.compile(r"^/\w+(?:@\w+)?")


class ParseError(ValueError):
    """The text is not valid Telegram HTML; the message is what Telegram answers."""


def user(user_id: int, name: str, *, is_bot: bool = False) -> dict[str, Any]:
    return {"id": user_id, "is_bot": is_bot, "first_name": name.capitalize(), "username": name}


def chat(chat_id: int, chat_type: str) -> dict[str, Any]:
    if chat_type == "private":
        return {"id": chat_id, "type": "private", "first_name": "Owner"}
    return {"id": chat_id, "type": chat_type, "title": "Team", "is_forum": chat_type == "supergroup"}


def entities(text: str) -> list[dict[str, Any]]:
    """The mention and bot-command entities Telegram would attach, with UTF-16 offsets as it counts."""

    def utf16(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    found = [("bot_command", m) for m in _COMMAND.finditer(text)]
    found += [("mention", m) for m in _MENTION.finditer(text)
              if not any(k == "bot_command" and c.start() <= m.start() < c.end() for k, c in found)]
    return [{"type": kind, "offset": utf16(text[:m.start()]), "length": utf16(m.group(0))} for kind, m in found]


def message(message_id: int, chat_json: dict[str, Any], from_json: dict[str, Any], text: str | None = None,
            **extra: Any) -> dict[str, Any]:
    """A Message object; `text` gets its entities, other fields (photo, caption, reply_markup…) as given."""
    body: dict[str, Any] = {"message_id": message_id, "date": int(time.time()), "chat": chat_json,
                            "from": from_json}
    if text is not None:
        body["text"] = text
        if found := entities(text):
            body["entities"] = found
    if extra.get("caption") and (found := entities(extra["caption"])):
        body["caption_entities"] = found
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def topic_opener(thread_id: int, chat_json: dict[str, Any], from_json: dict[str, Any]) -> dict[str, Any]:
    """The service message that opened a forum topic (every topic message "replies" to it)."""
    return message(thread_id, chat_json, from_json, message_thread_id=thread_id,
                   forum_topic_created={"name": "Topic", "icon_color": 7322096})


def visible_text(text: str) -> str:
    """The text a user sees for an HTML-mode message; raises ParseError where Telegram would refuse it."""
    stray = _TAG.sub("", text)
    if "<" in stray or ">" in stray:
        raise ParseError("Bad Request: can't parse entities: unescaped < or > in text")
    if _BARE_AMPERSAND.search(text):
        raise ParseError("Bad Request: can't parse entities: unescaped & in text")
    checker = _Checker()
    checker.feed(text)
    checker.close()
    if checker.stack:
        raise ParseError("Bad Request: can't parse entities: can't find end tag corresponding to "
                         f"<{checker.stack[-1]}>")
    return "".join(checker.text)


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            raise ParseError(f"Bad Request: can't parse entities: unsupported start tag \"{tag}\"")
        if tag == "a" and not dict(attrs).get("href"):
            raise ParseError("Bad Request: can't parse entities: a tag without href")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            raise ParseError(f"Bad Request: can't parse entities: unmatched end tag \"{tag}\"")
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
