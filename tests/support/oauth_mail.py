"""IMAP and SMTP that accept ONLY SASL XOAUTH2 with a live token from the fake authorization server.

One pymap (in-memory) store holds every user's mailboxes; in front of it, per provider, an IMAP gateway
on implicit TLS and an aiosmtpd SMTP server, as the providers run them:
- Google (`imap_port`/`smtp_port` of `servers["google"]`): IMAPS like imap.gmail.com:993, SMTPS like
  smtp.gmail.com:465. The token must be Google's with `https://mail.google.com/` for the user named in
  the SASL string. Folders are Gmail's labels: INBOX, [Gmail]/Sent Mail, [Gmail]/Drafts, [Gmail]/All Mail,
  [Gmail]/Spam, [Gmail]/Trash, [Gmail]/Starred. On failure both answer with Google's documented error
  challenge (`+ ` / `334 ` and base64 of {"status":"401","schemes":"bearer","scope":...}); after the
  client's empty line: `NO [AUTHENTICATIONFAILED] Invalid credentials (Failure)` / `535 5.7.8`.
- Microsoft (`servers["microsoft"]`): IMAPS like outlook.office365.com:993, SMTP with STARTTLS required
  like smtp.office365.com:587. The token must be for the Outlook resource with IMAP.AccessAsUser.All /
  SMTP.Send. Failure: `NO AUTHENTICATE failed.` / `535 5.7.3 Authentication unsuccessful`; MAIL FROM
  another address is refused (`550 5.7.60`, SendAsDenied). Folders: Sent Items, Drafts, Deleted Items,
  Junk Email, Archive.
Both file each message sent through SMTP in the user's sent folder themselves (Gmail does; Exchange
Online does for SMTP submission), so a client must not APPEND its own copy. IMAP LOGIN is refused.
The gateway speaks the pre-authentication part of IMAP itself (CAPABILITY with SASL-IR and AUTH=XOAUTH2,
AUTHENTICATE with or without an initial response, ID, NOOP, LOGOUT) and after success relays the
connection to pymap, logged in as that user: Dovecot's oauth2 passdb in front of a real store.

A test drives it through the `oauth_mail` fixture (tests/fixtures/oauth_fakes.py):
    mail.deliver("owner@gmail.example", raw_bytes)          # into INBOX (or folder=...), before the test reads
    mail.messages("owner@gmail.example", "[Gmail]/Sent Mail")   # raw messages of a folder
    mail.received  / mail.arrived / mail.stall               # what SMTP accepted; set when one arrives; hold DATA
    mail.logins, mail.refusals                               # ("imap"|"smtp", user) per attempt
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import imaplib
import json
import re
import secrets
import threading
import warnings
from argparse import Namespace
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, Session
from proxyprotocol.reader import ProxyProtocolReader
from pymap.backend.dict import DictBackend, Identity
from pymap.imap import IMAPServer
from pymap.user import Passwords, UserMetadata

from tests.support.oauth_host import FakeHost
from tests.support.oauth_provider import GOOGLE_MAIL, OUTLOOK_IMAP, OUTLOOK_SMTP, OAuthFake, Provider

FOLDERS: dict[Provider, list[str]] = {
    "google": ["[Gmail]/Sent Mail", "[Gmail]/Drafts", "[Gmail]/All Mail", "[Gmail]/Spam", "[Gmail]/Trash",
               "[Gmail]/Starred"],
    "microsoft": ["Sent Items", "Drafts", "Deleted Items", "Junk Email", "Archive"],
}
SENT: dict[Provider, str] = {"google": "[Gmail]/Sent Mail", "microsoft": "Sent Items"}
_SASL = re.compile(rb"^user=([^\x01]*)\x01auth=Bearer ([^\x01]+)\x01\x01$", re.IGNORECASE)
_CAPS = b"IMAP4rev1 UNSELECT IDLE NAMESPACE ID CHILDREN UIDPLUS MOVE SASL-IR AUTH=XOAUTH2"


@dataclass(frozen=True)
class Sent:
    provider: Provider
    user: str
    mail_from: str
    rcpt_tos: list[str]
    data: bytes


@dataclass
class Ports:
    imap_port: int = 0
    smtp_port: int = 0


@dataclass
class OAuthMail:
    oauth: OAuthFake
    servers: dict[Provider, Ports] = field(default_factory=dict)
    received: list[Sent] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    refusals: list[tuple[str, str]] = field(default_factory=list)
    stall: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    store_port: int = 0  # pymap itself, plain, password login as any user with `secret` (the gateways use it)
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    add_user: Callable[[str], None] = lambda user: None
    _users: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        self.received.clear()
        self.logins.clear()
        self.refusals.clear()
        self.stall = False
        self.arrived.clear()

    # ---- test-side helpers (blocking: call from the test's thread or through asyncio.to_thread) ---------
    def _store(self, user: str) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.store_port, timeout=10)
        client.login(user, self.secret)
        return client

    def ensure_user(self, user: str, provider: Provider) -> None:
        """Give `user` a mailbox with the provider's folders (done at their first login anyway)."""
        with self._lock:  # held throughout: a second login of a new user waits for its folders
            if user in self._users:
                return
            self.add_user(user)
            with self._store(user) as client:  # logs out on leaving
                for folder in FOLDERS[provider]:
                    client.create(f'"{folder}"')
            self._users.add(user)

    def deliver(self, user: str, raw: bytes, folder: str = "INBOX", *, provider: Provider = "google",
                seen: bool = False) -> int:
        """APPEND a message for `user`; returns its UID."""
        self.ensure_user(user, provider)
        with self._store(user) as client:  # logs out on leaving
            typ, data = client.append(f'"{folder}"', "(\\Seen)" if seen else "", None, raw)
        found = re.search(rb"APPENDUID \d+ (\d+)", data[0] or b"")
        assert typ == "OK" and found, data
        return int(found.group(1))

    def messages(self, user: str, folder: str) -> list[bytes]:
        with self._store(user) as client:  # logs out on leaving
            client.select(f'"{folder}"', readonly=True)
            _, ids = client.uid("SEARCH", "ALL")
            found = []
            for uid in (ids[0] or b"").split():
                _, parts = client.uid("FETCH", uid, "(BODY.PEEK[])")
                found.append(next(p[1] for p in parts if isinstance(p, tuple)))
        return found

    # ---- the XOAUTH2 check --------------------------------------------------------------------------------
    def authenticate(self, provider: Provider, protocol: str, sasl: bytes, needed: str) -> str | None:
        """The user a SASL XOAUTH2 string authenticates for the scope `needed`, or None; recorded either way
        in `logins` / `refusals`."""
        match = _SASL.match(sasl)
        user, token = (match.group(1).decode(errors="replace"), match.group(2).decode()) if match else ("", "")
        found = self.oauth.bearer(token)
        resource = "google" if provider == "google" else "outlook"
        ok = (found is not None and found.resource == resource and found.user.lower() == user.lower()
              and needed in found.scopes)
        (self.logins if ok else self.refusals).append((protocol, user))
        return found.user if ok and found else None


def _challenge(scope: str) -> bytes:
    return json.dumps({"status": "401", "schemes": "bearer", "scope": scope}).encode()


class ImapGateway:
    """The pre-authentication dialogue, then a relay to the store logged in as the user."""

    def __init__(self, mail: OAuthMail, provider: Provider) -> None:
        self.mail, self.provider = mail, provider

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # CancelledError: the session is over and the host stops; ending quietly spares asyncio's report
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.CancelledError):
            signed_in = await self._dialogue(reader, writer)
            if signed_in is not None:
                await self._relay(*signed_in, reader, writer)
        writer.close()

    async def _dialogue(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> tuple[bytes, str] | None:
        writer.write(b"* OK [CAPABILITY " + _CAPS + b"] ready for requests\r\n")
        while line := await reader.readline():
            tag, _, rest = line.rstrip(b"\r\n").partition(b" ")
            command, _, args = rest.partition(b" ")
            verb = command.upper()
            if verb == b"CAPABILITY":
                writer.write(b"* CAPABILITY " + _CAPS + b"\r\n" + tag + b" OK Success\r\n")
            elif verb in {b"NOOP", b"ID"}:
                writer.write((b"* ID NIL\r\n" if verb == b"ID" else b"") + tag + b" OK Success\r\n")
            elif verb == b"LOGOUT":
                writer.write(b"* BYE LOGOUT Requested\r\n" + tag + b" OK Success\r\n")
                return None
            elif verb == b"LOGIN":
                self.mail.refusals.append(("imap", args.split(b" ")[0].strip(b'"').decode(errors="replace")))
                writer.write(tag + b" NO [AUTHENTICATIONFAILED] Invalid credentials (Failure)\r\n")
            elif verb == b"AUTHENTICATE":
                user = await self._authenticate(tag, args, reader, writer)
                if user is not None:
                    return tag, user
            else:
                writer.write(tag + b" BAD Unknown command or not allowed before authentication\r\n")
            await writer.drain()
        return None

    async def _authenticate(self, tag: bytes, args: bytes, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> str | None:
        mechanism, _, initial = args.partition(b" ")
        if mechanism.upper() != b"XOAUTH2":
            writer.write(tag + b" NO [CANNOT] Unsupported authentication mechanism\r\n")
            return None
        if not initial:
            writer.write(b"+ \r\n")
            await writer.drain()
            initial = (await reader.readline()).strip()
        try:
            sasl = base64.b64decode(initial, validate=True)
        except binascii.Error:
            writer.write(tag + b" BAD Invalid SASL argument\r\n")
            return None
        needed = GOOGLE_MAIL if self.provider == "google" else OUTLOOK_IMAP
        user = self.mail.authenticate(self.provider, "imap", sasl, needed)
        if user is not None:
            await asyncio.to_thread(self.mail.ensure_user, user, self.provider)
            return user
        if self.provider == "google":
            writer.write(b"+ " + base64.b64encode(_challenge(GOOGLE_MAIL)) + b"\r\n")
            await writer.drain()
            await reader.readline()
            writer.write(tag + b" NO [AUTHENTICATIONFAILED] Invalid credentials (Failure)\r\n")
        else:
            writer.write(tag + b" NO AUTHENTICATE failed.\r\n")
        return None

    async def _relay(self, tag: bytes, user: str, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.mail.store_port)
        await up_reader.readline()  # the store's greeting
        up_writer.write(b'g0 LOGIN "' + user.encode() + b'" "' + self.mail.secret.encode() + b'"\r\n')
        while not (answer := await up_reader.readline()).startswith(b"g0 "):
            pass
        assert answer.startswith(b"g0 OK"), answer
        writer.write(tag + b" OK [CAPABILITY " + _CAPS.replace(b" SASL-IR AUTH=XOAUTH2", b"") + b"] "
                     + user.encode() + b" authenticated (Success)\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


class SmtpHandler:
    """aiosmtpd handler: the XOAUTH2 mechanism, the provider's sender rule, recording and the sent copy."""

    def __init__(self, mail: OAuthMail, provider: Provider) -> None:
        self.mail, self.provider = mail, provider

    async def auth_XOAUTH2(self, server: SMTP, args: list[str]) -> AuthResult:
        if len(args) > 1:
            try:
                sasl = base64.b64decode(args[1], validate=True)
            except binascii.Error:
                return AuthResult(success=False, handled=False, message="501 5.5.2 Cannot decode response")
        else:
            answer = await server.challenge_auth("")
            if not isinstance(answer, bytes):
                return AuthResult(success=False, handled=True)
            sasl = answer
        needed = GOOGLE_MAIL if self.provider == "google" else OUTLOOK_SMTP
        user = self.mail.authenticate(self.provider, "smtp", sasl, needed)
        if user is not None:
            await asyncio.to_thread(self.mail.ensure_user, user, self.provider)
            return AuthResult(success=True, auth_data=user, message="235 2.7.0 Accepted")
        if self.provider == "google":
            await server.challenge_auth(_challenge(GOOGLE_MAIL))
            return AuthResult(success=False, handled=False, message="535 5.7.8 Username and Password not "
                              "accepted. For more information, go to https://support.google.com/mail/?p=BadCredentials")
        return AuthResult(success=False, handled=False, message="535 5.7.3 Authentication unsuccessful")

    async def handle_MAIL(self, server: SMTP, session: Session, envelope: Envelope, address: str,
                          mail_options: list[str]) -> str:
        if self.provider == "microsoft" and address.lower() != str(session.auth_data).lower():
            return "550 5.7.60 SMTP; Client does not have permissions to send as this sender"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 2.1.0 Sender OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert isinstance(envelope.original_content, bytes)
        user = str(session.auth_data)
        self.mail.received.append(Sent(self.provider, user, str(envelope.mail_from), list(envelope.rcpt_tos),
                                       envelope.original_content))
        self.mail.arrived.set()
        while self.mail.stall:  # a flag set from the test's thread: checked briefly on the server loop
            await asyncio.sleep(0.02)
        await asyncio.to_thread(self.mail.deliver, user, envelope.original_content, SENT[self.provider],
                                provider=self.provider, seen=True)
        return "250 2.0.0 OK"


StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _store(stack: AsyncExitStack) -> tuple[StreamHandler, Callable[[str, str], Awaitable[None]]]:
    """pymap's in-memory store: its connection handler and a coroutine adding a user."""
    args = Namespace(host="127.0.0.1", port=0, debug=False, cert=None, key=None, tls=False, passlib_cfg=None,
                     proxy_protocol=None, inherited_sockets=None, demo_data=False, demo_user="nobody@invalid",
                     demo_password=secrets.token_urlsafe(16))
    backend, config = await DictBackend.init(args)
    config.apply_context()
    await backend.start(stack)
    login = backend.login

    async def add_user(user: str, password: str) -> None:
        hashed = await Passwords(config).hash_password(password)
        await Identity(user, login, None, frozenset()).set(UserMetadata(config, user, password=hashed))

    return ProxyProtocolReader(config.proxy_protocol).get_callback(IMAPServer(login, config)), add_user


def start_oauth_mail(host: FakeHost, oauth: OAuthFake, stack: AsyncExitStack) -> OAuthMail:
    """Start the store and both providers' IMAP and SMTP on `host`'s loop (call from another thread)."""
    mail = OAuthMail(oauth)
    store, add_user = host.run(_store(stack))
    mail.store_port = host.listen(streams=store)
    mail.add_user = lambda user: asyncio.run_coroutine_threadsafe(add_user(user, mail.secret), host.loop).result(30)
    deny = lambda *_: AuthResult(success=False, handled=False)  # noqa: E731 - only the built-in mechanisms call it
    for provider in ("google", "microsoft"):
        handler = SmtpHandler(mail, provider)
        tls = {"tls_context": host.tls, "require_starttls": True} if provider == "microsoft" else {}

        def smtp(handler: SmtpHandler = handler, tls: dict[str, Any] = tls) -> SMTP:
            with warnings.catch_warnings():  # "AUTH without TLS": Google's listener is implicit TLS, unseen by it
                warnings.simplefilter("ignore", UserWarning)
                return SMTP(handler, hostname=f"smtp.{handler.provider}.test", authenticator=deny, auth_required=True,
                            auth_require_tls=bool(tls), auth_exclude_mechanism=["LOGIN", "PLAIN"],
                            loop=host.loop, **tls)

        mail.servers[provider] = Ports(imap_port=host.listen(streams=ImapGateway(mail, provider), tls=True),
                                       smtp_port=host.listen(smtp, tls=provider == "google"))
    return mail
