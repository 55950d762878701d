"""Telegram messages translated to `Inbound`: which messages are for the bot, the text the gateway
sees, the conversation thread, and attachments downloaded into the data directory."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from telegram import Message, MessageEntity, User
from telegram.constants import ChatType
from telegram.error import BadRequest

from gateway.surfaces.files import safe_name, save
from store.records import Attachment, Inbound

log = logging.getLogger(__name__)

SURFACE = "telegram"
_GROUPS = (ChatType.GROUP, ChatType.SUPERGROUP)


def addressed_text(message: Message, bot: User) -> str | None:
    """The text the gateway should see, or None when the message is not for the bot.

    Private chats: every message. Groups: a message that mentions the bot (@name, including a command
    addressed as /cmd@name) or replies to one of its messages. The bot's @name is removed from the text.
    """
    text = message.text or message.caption or ""
    if message.chat.type not in (ChatType.PRIVATE, *_GROUPS) or not bot.username:
        return None
    if message.chat.type != ChatType.PRIVATE:
        handle = f"@{bot.username}".lower()
        kinds: list[str | None] = [MessageEntity.MENTION, MessageEntity.BOT_COMMAND]
        spans = {**message.parse_entities(kinds), **message.parse_caption_entities(kinds)}
        mentioned = any(span.lower().endswith(handle) for span in spans.values())  # @name or /cmd@name
        if not (mentioned or _replies_to(message, bot.id)):
            return None
    stripped, mentions = re.subn(rf"[ \t]?@{re.escape(bot.username)}\b", "", text, flags=re.IGNORECASE)
    return stripped.strip() if mentions else text


def _replies_to(message: Message, bot_id: int) -> bool:
    replied = message.reply_to_message
    # In a forum every topic message "replies" to the topic's opening service message; that is no reply.
    return (replied is not None and replied.forum_topic_created is None
            and replied.from_user is not None and replied.from_user.id == bot_id)


def thread_of(message: Message) -> str | None:
    """The forum topic as the thread id (a session per topic). Replies in ordinary groups also carry a
    message_thread_id, which is not a conversation of its own, hence the is_topic_message check."""
    return str(message.message_thread_id) if message.is_topic_message and message.message_thread_id else None


def to_inbound(message: Message, user: User, text: str, attachments: list[Attachment]) -> Inbound:
    """The `Inbound` for a message from `user` addressed to the bot."""
    return Inbound(
        surface=SURFACE,
        chat_id=str(message.chat_id),
        user_id=str(user.id),
        text=text,
        thread_id=thread_of(message),
        user_name=user.username or user.full_name,
        is_group=message.chat.type != ChatType.PRIVATE,
        attachments=attachments,
        platform_message_id=str(message.message_id),
    )


async def download_attachments(message: Message, root: Path) -> list[Attachment]:
    """Download the message's photo (largest size), document, voice note and audio file to
    `root/<chat id>/<message id>-<name>`. A file Telegram will not serve (over the Bot API's download
    limit) is listed without a path; other errors propagate, so the update is retried."""
    found: list[tuple[str, str, str, int | None]] = []  # file id, name, mime type, announced size
    if message.photo:
        photo = message.photo[-1]
        found.append((photo.file_id, f"photo-{photo.file_unique_id}.jpg", "image/jpeg", photo.file_size))
    if message.document:
        doc = message.document
        found.append((doc.file_id, doc.file_name or f"document-{doc.file_unique_id}",
                      doc.mime_type or "application/octet-stream", doc.file_size))
    if message.voice:
        voice = message.voice
        found.append((voice.file_id, f"voice-{voice.file_unique_id}.ogg", voice.mime_type or "audio/ogg",
                      voice.file_size))
    if message.audio:
        audio = message.audio
        found.append((audio.file_id, audio.file_name or f"audio-{audio.file_unique_id}",
                      audio.mime_type or "audio/mpeg", audio.file_size))
    folder = root / str(message.chat_id)
    attachments = []
    for file_id, name, mime_type, size in found:
        name = safe_name(name)
        try:
            tg_file = await message.get_bot().get_file(file_id)
            data = await tg_file.download_as_bytearray()
        except BadRequest as exc:
            log.warning("telegram_attachment_unavailable chat=%s message=%s error=%s",
                        message.chat_id, message.message_id, exc)
            attachments.append(Attachment(name=name, mime_type=mime_type, size=size or 0))
            continue
        path = folder / f"{message.message_id}-{name}"
        await save(path, bytes(data))
        attachments.append(Attachment(name=name, mime_type=mime_type, size=len(data), path=str(path)))
    return attachments

