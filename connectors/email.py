"""One mailbox over IMAP (read) and SMTP (send), knowing nothing of models, chats or approvals.

`EmailClient` reads through one kept-open IMAP connection (`connectors.imap`) and connects to SMTP per
send: sends are rare, and a long-lived SMTP session is usually cut by the provider anyway. Failures are
`EmailError`s whose message says what failed and never contains the password or a token.

An OAuth account (Gmail, Microsoft 365) signs in to both servers with SASL XOAUTH2 and an access token from
its `TokenProvider` instead of a password; a `SignInNeeded` from the provider passes through unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from contextlib import suppress
from datetime import date
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import getaddresses

import aioimaplib
import aiosmtplib
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from connectors.imap import ImapConnection, Security, imap_date, mailbox, quote, searched, server_text
from connectors.mailerrors import EmailError, network_error, scrubbed
from connectors.mailparse import MailMessage, MailSummary, parse_message, summarize
from connectors.oauth_token import TokenProvider

__all__ = ["EmailClient", "EmailError", "EmailSettings", "MailboxStatus", "SendResult"]

log = logging.getLogger(__name__)

# Search results only need headers and the start of the text, so they fetch a bounded prefix per message.
SUMMARY_PREFIX_BYTES = 16_384
MAX_SEARCH_RESULTS = 50


class EmailSettings(BaseModel):
    """Where and as whom to read and send mail. Field names match the gateway's `[email]` config section
    (with the password itself instead of the name of its environment variable)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    imap_host: str
    imap_port: int = 993
    imap_security: Security = "ssl"
    smtp_host: str
    smtp_port: int = 465
    smtp_security: Security = "ssl"
    username: str
    password: SecretStr = SecretStr("")
    smtp_username: str | None = Field(None, description="SMTP login if it differs from `username`; '' sends "
                                                        "without AUTH (a local relay)")
    smtp_password: SecretStr | None = Field(None, description="SMTP password if it differs from `password`")
    from_address: str
    from_name: str = ""
    sent_folder: str = Field("", description="folder that gets a copy of each sent message; '' for none")
    timeout_s: float = Field(30, gt=0)

    @property
    def smtp_login(self) -> tuple[str, str] | None:
        """(user, password) for SMTP AUTH, or None to send without logging in."""
        user = self.username if self.smtp_username is None else self.smtp_username
        if not user:
            return None
        password = self.password if self.smtp_password is None else self.smtp_password
        return user, password.get_secret_value()


class MailboxStatus(BaseModel):
    """Whether both servers answer and accept our login, and how full the inbox is."""

    account: str
    imap: str = Field(description="'ok' or what went wrong")
    smtp: str = Field(description="'ok' or what went wrong")
    messages: int | None = None
    unseen: int | None = None

    @property
    def reachable(self) -> bool:
        return self.imap == "ok" and self.smtp == "ok"


class SendResult(BaseModel):
    message_id: str
    accepted: list[str]
    refused: dict[str, str] = Field(default_factory=dict)
    sent_copy: str = Field(default="", description="where the copy was filed or why not; '' with no sent folder")


class EmailClient:
    """IMAP and SMTP access to one account. Use as an async context manager, or call `aclose()` when done.

    `tls_context` verifies the servers' certificates (default: the system trust store); tests pass one
    that trusts their own CA. With `token` (an OAuth account) both servers are signed in to with SASL
    XOAUTH2 as `username`, and the passwords are unused.
    """

    def __init__(self, settings: EmailSettings, *, tls_context: ssl.SSLContext | None = None,
                 token: TokenProvider | None = None) -> None:
        self.settings = settings
        self._tls = tls_context or ssl.create_default_context()
        self._token = token
        self._imap = ImapConnection(host=settings.imap_host, port=settings.imap_port,
                                    security=settings.imap_security, username=settings.username,
                                    password=settings.password, timeout=settings.timeout_s, tls=self._tls,
                                    token=token)
        self._smtp_where = f"SMTP server {settings.smtp_host}:{settings.smtp_port}"

    def watch_connection(self) -> ImapConnection:
        """A new IMAP connection to this mailbox, signed in the same way, for a folder watch (an IDLE holds
        its connection, so it cannot share the tools' one)."""
        s = self.settings
        return ImapConnection(host=s.imap_host, port=s.imap_port, security=s.imap_security, username=s.username,
                              password=s.password, timeout=s.timeout_s, tls=self._tls, token=self._token)

    async def status(self) -> MailboxStatus:
        """Check both servers (login included) and count the INBOX's messages; reports a failure, and
        raises only `SignInNeeded` (an OAuth account that must be signed in again: one line says it all)."""

        async def counts(imap: aioimaplib.IMAP4) -> tuple[int, int]:
            response = await imap.status(mailbox("INBOX"), "(MESSAGES UNSEEN)")
            text = b" ".join(bytes(x) for x in response.lines)
            found = {k.decode(): int(v) for k, v in re.findall(rb"(MESSAGES|UNSEEN) (\d+)", text)}
            if response.result != "OK" or len(found) != 2:
                raise EmailError(f"{self._imap.where} did not report INBOX counts: {server_text(response)}",
                                 remote=True)
            return found["MESSAGES"], found["UNSEEN"]

        async def imap_check() -> tuple[str, tuple[int, int] | None]:
            try:
                return "ok", await self._imap.run(counts)
            except EmailError as exc:
                return str(exc), None

        async def smtp_check() -> str:
            try:
                smtp = await self._smtp_connect()
            except EmailError as exc:
                return str(exc)
            with suppress(aiosmtplib.SMTPException):
                await smtp.quit()
            return "ok"

        (imap, found), smtp = await asyncio.gather(imap_check(), smtp_check())
        return MailboxStatus(account=self.settings.from_address, imap=imap, smtp=smtp,
                             messages=found[0] if found else None, unseen=found[1] if found else None)

    async def search(self, *, from_: str | None = None, to: str | None = None, subject: str | None = None,
                     text: str | None = None, since: date | None = None, before: date | None = None,
                     unseen: bool = False, folder: str = "INBOX", limit: int = 20) -> list[MailSummary]:
        """Messages matching every given criterion, newest first, at most `limit` (capped at 50).

        `since`/`before` compare arrival dates (before is exclusive); string criteria match substrings.
        """
        criteria: list[str] = ["UNSEEN"] if unseen else []
        for key, value in (("FROM", from_), ("TO", to), ("SUBJECT", subject), ("TEXT", text)):
            if value and value.strip():
                criteria += [key, quote(value)]
        criteria += ["SINCE", imap_date(since)] if since else []
        criteria += ["BEFORE", imap_date(before)] if before else []
        charset = None if all(c.isascii() for c in criteria) else "UTF-8"
        limit = max(1, min(limit, MAX_SEARCH_RESULTS))

        async def op(imap: aioimaplib.IMAP4) -> list[MailSummary]:
            await self._imap.select(imap, folder)
            response = await imap.uid_search(*(criteria or ["ALL"]), charset=charset)
            if response.result != "OK":
                raise EmailError(f"{self._imap.where} refused the search: {server_text(response)}", remote=True)
            uids = sorted(searched(response.lines))[-limit:]
            if not uids:
                return []
            found = await self._imap.fetch(imap, uids, f"BODY.PEEK[]<0.{SUMMARY_PREFIX_BYTES}>")
            return [summarize(uid, found[uid][0], unseen=found[uid][1]) for uid in reversed(uids) if uid in found]

        return await self._imap.run(op)

    async def get(self, uid: int, folder: str = "INBOX") -> MailMessage:
        """One whole message by UID, decoded. Reading it does not mark it seen."""

        async def op(imap: aioimaplib.IMAP4) -> MailMessage:
            await self._imap.select(imap, folder)
            found = await self._imap.fetch(imap, [uid], "BODY.PEEK[]")
            if uid not in found:
                raise EmailError(f"there is no message with UID {uid} in {folder!r}")
            raw, unseen = found[uid]
            return parse_message(uid, folder, raw, unseen=unseen)

        return await self._imap.run(op)

    async def _smtp_connect(self) -> aiosmtplib.SMTP:
        s = self.settings
        login = (s.username, "") if self._token else s.smtp_login
        smtp = aiosmtplib.SMTP(hostname=s.smtp_host, port=s.smtp_port, timeout=s.timeout_s,
                               use_tls=s.smtp_security == "ssl", start_tls=s.smtp_security == "starttls",
                               tls_context=self._tls)
        secrets = [login[1]] if login else []  # what an error text must never echo
        try:
            await smtp.connect()
            if login is not None:
                if smtp.last_ehlo_response is None:  # connect() greets only when STARTTLS needed it
                    await smtp.ehlo()
                if not smtp.supports_extension("auth"):
                    smtp.close()
                    raise EmailError(f"{self._smtp_where} offers no login (AUTH); for a relay that takes mail "
                                     "without one, set smtp_username = \"\"")
                if self._token:
                    await self._smtp_xoauth2(smtp, login[0], secrets)
                else:
                    await smtp.login(*login)
        except aiosmtplib.SMTPAuthenticationError as exc:
            smtp.close()
            what = "refused the access token" if self._token else "failed"
            text = f"SMTP login to {s.smtp_host}:{s.smtp_port} as {login[0] if login else ''} {what}: " \
                   f"{exc.code} {exc.message}"
            raise EmailError(scrubbed(text, *secrets), remote=True) from None
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            smtp.close()
            text = network_error(exc, self._smtp_where, s.timeout_s) or f"{self._smtp_where} failed: {exc}"
            raise EmailError(scrubbed(text, *secrets)) from None
        except BaseException:  # SignInNeeded (its one line passes through) or a cancellation
            smtp.close()
            raise
        return smtp

    async def _smtp_xoauth2(self, smtp: aiosmtplib.SMTP, user: str, secrets: list[str]) -> None:
        """aiosmtplib's XOAUTH2 (≥ 5.1). It is called here rather than through the constructor's
        `oauth_token_generator` so that a refused token can be retried on the same connection: it is reported
        to the provider, which refreshes it, and the answer is tried only if it changed."""
        assert self._token is not None
        token = await self._token()
        secrets.append(token)
        try:
            await smtp.auth_xoauth2(user, token)
        except aiosmtplib.SMTPAuthenticationError:
            fresh = await self._token(refused=token)
            if fresh == token:
                raise
            secrets.append(fresh)
            log.info("smtp xoauth2 refused; retrying with a newer token host=%s", self.settings.smtp_host)
            await smtp.auth_xoauth2(user, fresh)

    async def send(self, message: EmailMessage) -> SendResult:
        """Send a fully built message as is (its Message-ID included), then file a copy in the sent folder
        if one is configured. Bcc recipients get it; the Bcc header itself is not transmitted.

        Raises EmailError with the server's reason on refusal; `maybe_sent` tells a broken-off send apart.
        """
        message_id = str(message["Message-ID"] or "")
        smtp = await self._smtp_connect()  # a failure up to here means nothing was sent
        try:
            refused, _ = await smtp.send_message(message)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            reasons = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            raise EmailError(f"{self._smtp_where} refused every recipient: {reasons}", remote=True) from None
        except aiosmtplib.SMTPResponseException as exc:
            raise EmailError(f"{self._smtp_where} refused the message: {exc.code} {exc.message}",
                             remote=True) from None
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            reason = network_error(exc, self._smtp_where, self.settings.timeout_s) or str(exc)
            raise EmailError(f"sending broke off, the message may or may not have been sent: {reason}",
                             maybe_sent=True) from None
        finally:
            with suppress(aiosmtplib.SMTPException):
                await smtp.quit()
        headers = [str(v) for h in ("To", "Cc", "Bcc") for v in message.get_all(h, [])]
        recipients = [addr for _, addr in getaddresses(headers)]
        log.info("smtp sent message_id=%s recipients=%d refused=%d", message_id, len(recipients), len(refused))
        result = SendResult(message_id=message_id, accepted=[r for r in recipients if r not in refused],
                            refused={r: f"{resp.code} {resp.message}" for r, resp in refused.items()})
        if self.settings.sent_folder:
            result.sent_copy = await self._file_sent_copy(message)
        return result

    async def _file_sent_copy(self, message: EmailMessage) -> str:
        folder = self.settings.sent_folder

        async def op(imap: aioimaplib.IMAP4) -> aioimaplib.Response:
            return await imap.append(message.as_bytes(policy=SMTP_POLICY), mailbox=mailbox(folder), flags="\\Seen")

        try:
            response = await self._imap.run(op, retry=False)  # a repeated APPEND could file two copies
        except EmailError as exc:
            log.warning("imap sent-copy failed folder=%s error=%s", folder, exc)
            return f"not saved to {folder}: {exc}"
        if response.result != "OK":
            log.warning("imap sent-copy refused folder=%s", folder)
            return f"not saved to {folder}: {server_text(response)}"
        return f"saved to {folder}"

    async def aclose(self) -> None:
        """Log out of IMAP (a later call reconnects)."""
        await self._imap.close()

    async def __aenter__(self) -> EmailClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
