"""Mail delivered the way a provider delivers it: an SMTP server (aiosmtpd) that files each message it
accepts into the test IMAP server (pymap) with APPEND, into the folder named by the recipient's
``+tag`` (``owner+Bank@example.test`` -> folder ``Bank``; no tag -> INBOX). `accepted_at` records when
the IMAP server acknowledged each APPEND (the start of the benchmark's latency).

The receiving server stamps its own Authentication-Results on top, as a real one does; `auth` per call
says what it found (``dmarc=pass header.from=bank.example``; None: a server that adds no such header),
and a sender's own header lower down is left where the sender put it.
"""

from __future__ import annotations

import asyncio
import imaplib
import secrets
import smtplib
import threading
import time
from email.message import EmailMessage
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

AUTHSERV = "mx.example.test"


class _Filer:
    def __init__(self, imap_port: int, user: str, password: str) -> None:
        self.imap_port, self.user, self.password = imap_port, user, password
        self.accepted_at: dict[str, float] = {}  # Message-ID -> time.monotonic() of the APPEND's OK
        self.auth_results: dict[str, str | None] = {}  # Message-ID -> what the receiving server found

    def _append(self, folder: str, raw: bytes, message_id: str) -> None:
        with imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=10) as client:
            client.login(self.user, self.password)
            typ, data = client.append(folder, "", imaplib.Time2Internaldate(time.time()), raw)
            assert typ == "OK", data
            self.accepted_at[message_id] = time.monotonic()
            client.logout()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        rcpt = envelope.rcpt_tos[0]
        local = rcpt.split("@", 1)[0]
        folder = local.split("+", 1)[1] if "+" in local else "INBOX"
        raw = envelope.original_content or b""
        message_id = _header(raw, b"Message-ID")
        found = self.auth_results.get(message_id, "none")
        stamped = raw if found is None else f"Authentication-Results: {AUTHSERV}; {found}\r\n".encode() + raw
        await asyncio.to_thread(self._append, folder, stamped, message_id)
        return "250 Delivered"


def _header(raw: bytes, name: bytes) -> str:
    for line in raw.split(b"\r\n"):
        if not line:
            break
        if line.lower().startswith(name.lower() + b":"):
            return line.split(b":", 1)[1].strip().decode()
    return ""


class MailDrop:
    """The SMTP server in front of the IMAP server, and a client to send through it."""

    def __init__(self, imap_port: int, user: str, password: str) -> None:
        self.user = user
        self.filer = _Filer(imap_port, user, password)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mail-drop", daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> None:
        """Listen on a port of the kernel's choosing, in a thread and event loop of its own."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._loop.create_server(
            lambda: SMTP(self.filer, hostname="localhost", loop=self._loop), "127.0.0.1", 0), self._loop).result()

    def stop(self) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def new_folder(self, prefix: str = "T") -> str:
        """A folder of its own for one test (the IMAP server lives for the whole session)."""
        name = f"{prefix}{secrets.token_hex(4)}"
        with imaplib.IMAP4("127.0.0.1", self.filer.imap_port, timeout=10) as client:
            client.login(self.user, self.filer.password)
            typ, data = client.create(name)
            assert typ == "OK", data
            client.logout()
        return name

    def send(self, folder: str, *, sender: str = "Ann <ann@bank.example>", subject: str = "Your statement",
             body: str = "Your statement is ready.", auth: str | None = "none",
             headers: dict[str, str] | None = None) -> str:
        """Send one message by SMTP to the owner's `folder`; returns its Message-ID."""
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = sender, self._address(folder), subject
        message_id = m["Message-ID"] = f"<{secrets.token_hex(8)}@bank.example>"
        for name, value in (headers or {}).items():
            m[name] = value
        m.set_content(body)
        self.filer.auth_results[message_id] = auth
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as smtp:
            smtp.send_message(m)
        return message_id

    async def asend(self, folder: str, **kwargs: Any) -> str:
        return await asyncio.to_thread(self.send, folder, **kwargs)

    def _address(self, folder: str) -> str:
        local, domain = self.user.split("@", 1)
        return f"{local}@{domain}" if folder == "INBOX" else f"{local}+{folder}@{domain}"
