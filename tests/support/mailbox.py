"""The mailbox the IMAP test server starts with: real RFC 822 messages, one per case the parser must handle.

Each message is written the way a real mail client would send it (encoded words, quoted-printable, base64,
a non-UTF-8 charset), so the tests exercise the same bytes a provider would hand us. `SEED` is appended
in order, so the test server gives the messages UIDs 1..N in that order; the fixture records the UID each
APPEND returned under the message's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP


@dataclass(frozen=True)
class Seed:
    key: str
    raw: bytes
    when: datetime
    seen: bool = False


def _at(day: int) -> datetime:
    return datetime(2024, 3, day, 9, 30, tzinfo=UTC)


def _utf8_plain() -> bytes:
    m = EmailMessage()
    m["From"] = "Alice Müller <alice@example.org>"
    m["To"] = "Owner <owner@example.test>"
    m["Subject"] = "Quarterly report — Grüße"
    m["Date"] = "Fri, 01 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<report-1@example.org>"
    m.set_content("Hi,\n\nthe quarterly numbers are attached in spirit. Grüße aus Köln, 你好!\n\nAlice\n",
                  cte="quoted-printable")
    return m.as_bytes(policy=SMTP)


def _alternative() -> bytes:
    m = EmailMessage()
    m["From"] = "Bob <bob@example.net>"
    m["To"] = "owner@example.test"
    m["Cc"] = "Carol <carol@example.com>"
    m["Subject"] = "Team lunch on Friday"
    m["Date"] = "Sat, 02 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<lunch-1@example.net>"
    m.set_content("Plain part: lunch is at noon at the noodle bar.\n")
    m.add_alternative("<html><body><p>HTML part: lunch is at <b>noon</b>.</p></body></html>", subtype="html")
    return m.as_bytes(policy=SMTP)


HTML_ONLY = (
    "<html><head><title>ignored title</title><style>p { color: red }</style>"
    "<script>alert('no')</script></head><body>"
    "<h1>Spring edition</h1><p>Fish &amp; chips are back&nbsp;on the menu.</p>"
    "<ul><li>Tuesday: tacos</li><li>Thursday: curry</li></ul>"
    "<table><tr><th>Day</th><th>Dish</th></tr><tr><td>Monday</td><td>Lentil soup</td></tr></table>"
    "<p>Read <a href=\"https://news.example.com/spring\">the full story</a>.<br>Thanks!</p>"
    "</body></html>"
)


def _html_only() -> bytes:
    m = EmailMessage()
    m["From"] = "Cafeteria News <news@example.com>"
    m["To"] = "owner@example.test"
    m["Subject"] = "Newsletter: spring edition"
    m["Date"] = "Sun, 03 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<news-1@example.com>"
    m.set_content(HTML_ONLY, subtype="html", cte="base64")
    return m.as_bytes(policy=SMTP)


# Written by hand: an 8-bit ISO-8859-1 body and an encoded-word subject, as older clients still send.
LATIN1 = (
    "From: =?iso-8859-1?q?Fran=E7ois?= <francois@example.fr>\r\n"
    "To: owner@example.test\r\n"
    "Subject: =?iso-8859-1?q?Caf=E9_cr=E8me_=E0_Z=FCrich?=\r\n"
    "Date: Mon, 04 Mar 2024 09:30:00 +0000\r\n"
    "Message-ID: <latin-1@example.fr>\r\n"
    "MIME-Version: 1.0\r\n"
    "Content-Type: text/plain; charset=iso-8859-1\r\n"
    "Content-Transfer-Encoding: 8bit\r\n"
    "\r\n"
).encode("ascii") + "Ça coûte très cher à Zürich, même le café.\r\n".encode("iso-8859-1")

ATTACHMENT_BYTES = bytes(range(256)) * 8  # 2048 bytes of binary


def _with_attachment() -> bytes:
    m = EmailMessage()
    m["From"] = "Carol <carol@example.com>"
    m["To"] = "owner@example.test"
    m["Subject"] = "Invoice 42"
    m["Date"] = "Tue, 05 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<invoice-42@example.com>"
    m.set_content("Please find the invoice attached.\n")
    m.add_attachment(ATTACHMENT_BYTES, maintype="application", subtype="pdf", filename="invoice-42.pdf")
    m.add_attachment(b"Lebenslauf\n", maintype="text", subtype="plain", filename="résumé.txt")
    return m.as_bytes(policy=SMTP)


def _thread_start() -> bytes:
    m = EmailMessage()
    m["From"] = "Dave <dave@example.org>"
    m["To"] = "owner@example.test"
    m["Subject"] = "Project kickoff"
    m["Date"] = "Wed, 06 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<kickoff-1@example.org>"
    m.set_content("Shall we start the project on Monday?\n")
    return m.as_bytes(policy=SMTP)


def _thread_reply() -> bytes:
    m = EmailMessage()
    m["From"] = "Erin <erin@example.org>"
    m["Reply-To"] = "Project list <project@example.org>"
    m["To"] = "owner@example.test"
    m["Subject"] = "Re: Project kickoff"
    m["Date"] = "Thu, 07 Mar 2024 09:30:00 +0000"
    m["Message-ID"] = "<kickoff-2@example.org>"
    m["In-Reply-To"] = "<kickoff-1@example.org>"
    m["References"] = "<kickoff-1@example.org>"
    m.set_content("Monday works for me. 会议纪要 follow.\n", cte="base64")
    return m.as_bytes(policy=SMTP)


SEED: tuple[Seed, ...] = (
    Seed("utf8", _utf8_plain(), _at(1), seen=True),
    Seed("alternative", _alternative(), _at(2), seen=True),
    Seed("html_only", _html_only(), _at(3)),
    Seed("latin1", LATIN1, _at(4)),
    Seed("attachment", _with_attachment(), _at(5)),
    Seed("thread_start", _thread_start(), _at(6), seen=True),
    Seed("thread_reply", _thread_reply(), _at(7)),
)

SENT_FOLDER = "Sent"
