"""Sending and editing Telegram messages for the outbox: formatting, splitting, plain-text fallback, and
Bot API errors mapped to `DeliveryError`.

A text longer than one message goes out as several, the keyboard under the last part, and `send`
returns the id of that last part: the message that carries the buttons, so the edit that later
records the decision (and removes the buttons) lands where the buttons are. An edit rewrites that one
message; an edit text longer than one message keeps its end.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import functools
import logging
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from gateway.surfaces.base import DeliveryError
from gateway.surfaces.telegram.format import escape, to_html
from gateway.surfaces.telegram.keyboard import keyboard
from gateway.surfaces.text import split_text
from store.records import Attachment, Origin, Outbound, OutboxItem

log = logging.getLogger(__name__)

T = TypeVar("T")
CAPTION_LIMIT = 1024  # characters of a file's caption
PHOTO_LIMIT = 10 * 1024 * 1024  # bytes Telegram takes as a photo (sendPhoto); larger images go as documents


def target(origin: Origin) -> tuple[int | str, int | None]:
    """(chat_id, message_thread_id) for the Bot API; numeric ids as ints, @usernames as they are."""
    chat: int | str = int(origin.chat_id) if origin.chat_id.lstrip("-").isdigit() else origin.chat_id
    return chat, int(origin.thread_id) if origin.thread_id else None


def retry_after_s(exc: RetryAfter) -> float:
    """The flood-control wait in seconds (PTB warns while it moves this attribute to timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def delivery_error(exc: TelegramError) -> DeliveryError:
    """Classify a Bot API failure: flood control and network trouble are worth retrying, a refusal of
    the request itself (bad request, bot blocked, chat gone, token revoked) is not."""
    if isinstance(exc, RetryAfter):
        return DeliveryError(f"flood control: {exc}", transient=True, retry_after=retry_after_s(exc))
    if isinstance(exc, ChatMigrated):
        return DeliveryError(f"the group moved to chat {exc.new_chat_id}", transient=False)
    if isinstance(exc, (BadRequest, Forbidden, InvalidToken)):
        return DeliveryError(f"rejected by Telegram: {exc}", transient=False)
    if isinstance(exc, NetworkError):  # includes TimedOut and 5xx answers
        return DeliveryError(f"network: {exc}", transient=True)
    return DeliveryError(f"Telegram error: {exc}", transient=True)


def _mentions(exc: BadRequest, phrase: str) -> bool:
    return phrase in str(exc).lower()


def file_field(attachment: Attachment) -> str:
    """How Telegram shows a file: "voice", "photo" (PNG/JPEG within the photo size limit) or "document"."""
    if attachment.mime_type == "audio/ogg":
        return "voice"
    if attachment.mime_type in ("image/png", "image/jpeg") and attachment.size <= PHOTO_LIMIT:
        return "photo"
    return "document"


class Sender:
    """Delivers outbox items through one bot. Remembers how many parts of a split message went out,
    so a retry after a failure midway sends only the rest instead of repeating the beginning."""

    def __init__(self, bot: Bot, limit: int) -> None:
        self.bot = bot
        self.limit = limit
        self._parts_sent: dict[int, tuple[int, int]] = {}  # outbox id -> (parts sent, last message id)

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str:
        """Send (or edit) the item's message; returns the platform message id. Raises DeliveryError."""
        outbound = item.outbound
        if not outbound.text.strip() and outbound.attachment is None:
            raise DeliveryError("empty message", transient=False)
        try:
            if edit_platform_id is not None:
                return await self._edit(outbound, int(edit_platform_id))
            if outbound.attachment is not None:
                return await self._send_file(outbound, outbound.attachment)
            return await self._send(item.id, outbound)
        except TelegramError as exc:
            error = delivery_error(exc)
        except ValueError as exc:  # a button Telegram cannot carry, a malformed message id
            error = DeliveryError(str(exc), transient=False)
        if not error.transient:
            self._parts_sent.pop(item.id, None)
        raise error

    async def _send(self, item_id: int, outbound: Outbound) -> str:
        chat, thread = target(outbound.origin)
        parts = split_text(outbound.text, self.limit, verbatim=outbound.preformatted)
        markup = keyboard(outbound.buttons)
        reply = (ReplyParameters(message_id=int(outbound.reply_to_platform_id), allow_sending_without_reply=True)
                 if outbound.reply_to_platform_id else None)
        done, last_id = self._parts_sent.get(item_id, (0, 0))
        for index in range(done, len(parts)):
            send = functools.partial(
                self.bot.send_message, chat, message_thread_id=thread,
                reply_markup=markup if index == len(parts) - 1 else None,
                reply_parameters=reply if index == 0 else None)
            message = await self._formatted(send, parts[index], outbound.preformatted)
            last_id = message.message_id
            self._parts_sent[item_id] = (index + 1, last_id)
        self._parts_sent.pop(item_id, None)
        log.debug("telegram_sent chat=%s parts=%s message=%s", chat, len(parts), last_id)
        return str(last_id)

    async def _send_file(self, outbound: Outbound, attachment: Attachment) -> str:
        """An OGG/Opus file as a voice note (sendVoice), a PNG or JPEG as a photo (sendPhoto), anything
        else as a document; the text is the caption (cut to Telegram's caption limit)."""
        chat, thread = target(outbound.origin)
        try:
            data = await asyncio.to_thread(Path(attachment.path).read_bytes)
        except OSError as exc:  # the artifact was deleted meanwhile: nothing to retry
            raise DeliveryError(f"attachment {attachment.name} cannot be read: {exc.strerror}",
                                transient=False) from None
        caption = outbound.text if len(outbound.text) <= CAPTION_LIMIT else outbound.text[:CAPTION_LIMIT - 1] + "…"
        field = file_field(attachment)
        senders: dict[str, Callable[..., Awaitable[Message]]] = {
            "voice": self.bot.send_voice, "photo": self.bot.send_photo, "document": self.bot.send_document}
        send = functools.partial(senders[field], chat, **{field: data}, filename=attachment.name,
                                 message_thread_id=thread, reply_markup=keyboard(outbound.buttons))

        async def with_caption(text: str, parse_mode: str | None) -> Message:
            return await send(caption=text, parse_mode=parse_mode)

        message = await self._formatted(with_caption, caption) if caption.strip() else await send()
        log.debug("telegram_sent_file chat=%s kind=%s message=%s", chat, field, message.message_id)
        return str(message.message_id)

    async def _edit(self, outbound: Outbound, message_id: int) -> str:
        chat, _ = target(outbound.origin)
        text = split_text(outbound.text, self.limit, verbatim=outbound.preformatted)[-1]
        markup = keyboard(outbound.buttons)  # none: the edit removes the keyboard
        edit = functools.partial(self.bot.edit_message_text, chat_id=chat, message_id=message_id, reply_markup=markup)
        try:
            await self._formatted(edit, text, outbound.preformatted)
        except BadRequest as exc:
            if not _mentions(exc, "message is not modified"):  # already shows this: the edit is done
                raise
        return str(message_id)

    async def _formatted(self, call: Callable[..., Awaitable[T]], markdown: str, preformatted: bool = False) -> T:
        """Make the call with the text as Telegram HTML (all of it in <pre>, escaped, when `preformatted`:
        links then show their real targets and no markup hides anything); if Telegram cannot parse it,
        again as plain text, so a formatting problem never loses the message."""
        html = f"<pre>{escape(markdown)}</pre>" if preformatted else to_html(markdown)
        if not html.strip():  # e.g. a lone ">" mid-stream: nothing visible as HTML, but text as written
            return await call(markdown, parse_mode=None)
        try:
            return await call(html, parse_mode=ParseMode.HTML)
        except BadRequest as exc:
            if not _mentions(exc, "can't parse entities"):
                raise
            log.warning("telegram_format_rejected fallback=plain error=%s", exc)
            return await call(markdown, parse_mode=None)
