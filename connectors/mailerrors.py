"""How a mail failure is told: one exception type, and plain sentences for network-level causes."""

from __future__ import annotations

import socket
import ssl


class EmailError(Exception):
    """A mail operation failed; the message says what (login, unreachable host, TLS, timeout, a refusal
    with the server's reason) and never contains the password.

    `maybe_sent` is True when a send broke off after the server may already have accepted the message,
    so the caller must not assume it can safely send again. `remote` is True when the message quotes the
    server (its reply text): the caller shows it as outside content.
    """

    def __init__(self, message: str, *, maybe_sent: bool = False, remote: bool = False) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent
        self.remote = remote


def network_error(exc: BaseException, where: str, timeout: float) -> str | None:
    """A sentence for a network-level failure anywhere in the exception chain, or None if there is none.

    `where` names the server ("IMAP server mail.example.com:993"). Libraries wrap the socket's error in
    their own (aiosmtplib's SMTPConnectError is itself an OSError), so the whole chain is searched for
    the most telling cause.
    """
    import aioimaplib  # a failure means a client existed, so these are loaded already
    import aiosmtplib

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__

    def find(*types: type[BaseException]) -> BaseException | None:
        return next((e for e in reversed(chain) if isinstance(e, types)), None)

    if isinstance(cert := find(ssl.SSLCertVerificationError), ssl.SSLCertVerificationError):
        return f"TLS certificate of {where} was rejected: {cert.verify_message}"
    if isinstance(tls := find(ssl.SSLError), ssl.SSLError):
        return f"TLS handshake with {where} failed ({tls.reason or tls}); check the security setting and port"
    if find(TimeoutError, aiosmtplib.SMTPTimeoutError, aioimaplib.CommandTimeout):
        return f"{where} did not answer within {timeout:g}s (wrong port or security setting, or host down)"
    if find(ConnectionRefusedError):
        return f"{where} is unreachable: connection refused"
    if find(socket.gaierror):
        return f"{where} is unreachable: the host name does not resolve"
    if isinstance(other := find(OSError), OSError):
        return f"{where} is unreachable: {other.strerror or other}"
    return None


def scrubbed(text: str, *secrets: str) -> str:
    """`text` with each secret (a password, an access token) masked: server replies and library messages
    may echo what we sent."""
    for secret in secrets:
        text = text.replace(secret, "***") if secret else text
    return text
