"""A new message as a trigger event, and whether a mail trigger's filters let it through.

Filters read only headers already fetched (no model call): a message that passes none of a folder's
triggers costs nothing but the fetch.
"""

from __future__ import annotations

from email import message_from_bytes, policy
from email.message import Message

from connectors.mail_filter import sender_address, sender_matches, sender_verified
from connectors.mailparse import parse_message
from store.triggers import TriggerEvent
from toolsets.schedule_triggers import EmailTrigger

TEXT_CHARS = 8_000  # what a prompt's turn sees of the body


def mail_key(account: str, folder: str, uidvalidity: int, uid: int) -> str:
    """The event key of one message: unique per folder for as long as its UIDVALIDITY holds."""
    return f"mail:{account}:{folder}:{uidvalidity}:{uid}"


def headers_of(raw: bytes) -> Message:
    return message_from_bytes(raw, policy=policy.default)


def passes(trigger: EmailTrigger, headers: Message, auth_serv_id: str) -> bool:
    """Whether the message passes every filter the trigger sets (`auth_serv_id`: the account's receiving
    server, whose Authentication-Results alone verify a sender)."""
    if trigger.senders and not sender_matches(sender_address(headers), trigger.senders):
        return False
    if trigger.subject and trigger.subject.casefold() not in str(headers.get("Subject", "")).casefold():
        return False
    return not (trigger.verified_sender and not sender_verified(headers, auth_serv_id))


def mail_event(account: str, folder: str, uidvalidity: int, uid: int, raw: bytes) -> TriggerEvent:
    """The event of message `uid` (`raw`: its headers and the start of its body)."""
    msg = parse_message(uid, folder, raw)
    address = sender_address(headers_of(raw)) or msg.sender or "unknown sender"
    body = msg.text if len(msg.text) <= TEXT_CHARS else msg.text[:TEXT_CHARS] + "\n[… the rest left out]"
    text = (f"New email in {account}/{folder}\nFrom: {msg.sender}\nTo: {msg.to}\nDate: {msg.date}\n"
            f"Subject: {msg.subject}\n\n{body}")
    return TriggerEvent(key=mail_key(account, folder, uidvalidity, uid), kind="email",
                        source=f"email from {address}", text=text,
                        fields={"from": msg.sender or address, "subject": msg.subject or "(no subject)",
                                "to": msg.to, "date": msg.date, "folder": folder, "account": account})
