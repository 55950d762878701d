"""Dashboard access: the token in the data directory, browser sessions, and the CSRF check.

The token (in `<data dir>/dashboard.token`, mode 0600) is the only way in: `anyy dashboard url` prints
a login link carrying it; the login exchanges it for an HttpOnly, SameSite=Strict session cookie, so
the token leaves the address bar after one request. Sessions live in memory: a restart of `anyy run`
means logging in again. Every state-changing request is a POST carrying the session's CSRF token.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from gateway.config import DashboardConfig

log = logging.getLogger(__name__)

TOKEN_FILE = "dashboard.token"
COOKIE = "anyy_dashboard"
PREFIX = "/dashboard"
LOGIN_PATH = f"{PREFIX}/login"
SESSION_TTL_S = 12 * 3600  # idle time after which a browser must log in again
_MIN_TOKEN_CHARS = 32


class DashboardError(Exception):
    """The dashboard cannot start or its token cannot be read; the message says what to do."""


def load_or_create_token(data_dir: Path) -> str:
    """The dashboard token, created (0600, 256 random bits) on first use. Blocking: call it from a thread."""
    path = data_dir / TOKEN_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # a copied or restored file must not stay readable by others
        token = path.read_text(encoding="ascii").strip()
        if len(token) < _MIN_TOKEN_CHARS:
            raise DashboardError(f"{path} does not hold a valid dashboard token; delete it and a new one "
                                 "is made at the next start") from None
        return token
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    log.info("dashboard_token_created path=%s", path)
    return token


def login_url(config: DashboardConfig, token: str) -> str:
    """The link `anyy dashboard url` prints. An unspecified listen address is reached via loopback."""
    host = config.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.port}{LOGIN_PATH}?{urlencode({'token': token})}"


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


@dataclass
class WebSession:
    """One logged-in browser."""

    csrf: str
    expires: float  # time.monotonic() deadline, extended on every request
    flash: str | None = None  # the answer to the last action, shown once on the next page

    def csrf_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.csrf.encode())

    def take_flash(self) -> str | None:
        flash, self.flash = self.flash, None
        return flash


class WebSessions:
    """Logged-in browsers by session id (the cookie's value)."""

    def __init__(self, ttl_s: float = SESSION_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._sessions: dict[str, WebSession] = {}

    def create(self) -> tuple[str, WebSession]:
        now = time.monotonic()
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}
        sid = secrets.token_urlsafe(32)
        session = WebSession(csrf=secrets.token_urlsafe(32), expires=now + self.ttl_s)
        self._sessions[sid] = session
        return sid, session

    def end(self, sid: str | None) -> None:
        """Log this browser out."""
        self._sessions.pop(sid or "", None)

    def get(self, sid: str | None) -> WebSession | None:
        session = self._sessions.get(sid or "")
        now = time.monotonic()
        if session is None or session.expires <= now:
            return None
        session.expires = now + self.ttl_s
        return session
