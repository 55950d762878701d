"""Google Calendar's CalDAV endpoint, played by Radicale behind a bearer-token check.

Google serves CalDAV at https://apidata.googleusercontent.com/caldav/v2/ and only with an OAuth 2.0
bearer token carrying https://www.googleapis.com/auth/calendar (calendar.readonly for reading). Here the
same paths live on the fakes' HTTPS app (`caldav.url` = <oauth base>/caldav/v2/): every request must carry
a live Google token of the fake authorization server with a calendar scope, or it gets Google's 401
(`WWW-Authenticate: Bearer ... error="invalid_token"`); then it runs in-process on a real Radicale
(WSGI, called off the loop), as the token's user (Radicale's http_x_remote_user auth, owner_only rights:
a user sees only their own calendars, 403 elsewhere).

Layout: the principal and calendar home of a user are /caldav/v2/<address>/, and the primary calendar is
/caldav/v2/<address>/events/ (Google's shape: calendar id = the address for the primary calendar), created
at the user's first request. Further calendars (`add_calendar`) are /caldav/v2/<address>/<id>/, not
Google's /caldav/v2/<id>/events/: a client finds them through the home set, as it must anyway.

A test drives it through the `google_caldav` fixture (tests/fixtures/oauth_fakes.py):
    google_caldav.url                              # what an account's caldav_url is set to
    google_caldav.calendar_url(user)               # the primary calendar's URL
    google_caldav.add_calendar(user, "Work")       # another calendar; returns its URL
    google_caldav.put_event(url, uid, ics)         # write an event as another client would
    google_caldav.requests                         # (method, path, status) of every request, in order
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from tests.support.oauth_provider import GOOGLE_CALENDAR, OAuthFake

PREFIX = "/caldav/v2"
READ_SCOPES = {GOOGLE_CALENDAR, "https://www.googleapis.com/auth/calendar.readonly"}
_READS = {"GET", "HEAD", "OPTIONS", "PROPFIND", "REPORT"}
_HOP = {"authorization", "host", "connection", "content-length", "content-type", "transfer-encoding",
        "x-remote-user", "x-script-name"}


class GoogleCalDAV:
    def __init__(self, oauth: OAuthFake, storage: Path) -> None:
        self.oauth, self.storage = oauth, storage
        self.requests: list[tuple[str, str, int]] = []
        self._app: Any = None
        self._lock = threading.RLock()  # held while a user is set up, which itself calls Radicale
        self._users: set[str] = set()

    @property
    def url(self) -> str:
        return f"{self.oauth.base_url}{PREFIX}/"

    def calendar_url(self, user: str) -> str:
        return f"{self.url}{quote(user, safe='')}/events/"  # Google and Radicale both write @ as %40

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", PREFIX + "{tail:(/.*)?}", self.handle)

    # ---- test-side helpers (blocking) -------------------------------------------------------------------
    def add_calendar(self, user: str, name: str) -> str:
        self._ensure(user)
        path = f"/{user}/{uuid.uuid4().hex[:12]}/"
        body = ('<?xml version="1.0" encoding="utf-8"?><c:mkcalendar xmlns:d="DAV:" '
                'xmlns:c="urn:ietf:params:xml:ns:caldav"><d:set><d:prop>'
                f'<d:displayname>{name}</d:displayname></d:prop></d:set></c:mkcalendar>')
        status, _, _ = self._call("MKCALENDAR", path, user, {}, body.encode())
        assert status.startswith("201"), status
        return f"{self.url.rstrip('/')}{quote(path)}"

    def put_event(self, calendar_url: str, uid: str, ics: str) -> str:
        """PUT `ics` as `<uid>.ics` into a calendar of its owner; returns the new ETag."""
        path = unquote(calendar_url.removeprefix(self.url.rstrip("/"))) + f"{uid}.ics"
        user = path.split("/")[1]
        status, headers, _ = self._call("PUT", path, user, {"CONTENT_TYPE": "text/calendar"}, ics.encode())
        assert status[:3] in {"201", "204"}, status
        return dict(headers).get("ETag", "")

    # ---- the proxy --------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        token = self.oauth.bearer(request.headers.get("Authorization"))
        needed = READ_SCOPES if request.method in _READS else {GOOGLE_CALENDAR}
        if token is None or token.resource != "google" or not token.scopes & needed:
            self.requests.append((request.method, request.path, 401))
            return web.json_response(
                {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                           "status": "UNAUTHENTICATED"}}, status=401,
                headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"'})
        await asyncio.to_thread(self._ensure, token.user)
        environ = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in request.headers.items()
                   if k.lower() not in _HOP}
        if "Content-Type" in request.headers:
            environ["CONTENT_TYPE"] = request.headers["Content-Type"]
        environ["QUERY_STRING"] = request.query_string
        path = request.path.removeprefix(PREFIX) or "/"
        status, headers, body = await asyncio.to_thread(self._call, request.method, path, token.user, environ,
                                                        await request.read())
        self.requests.append((request.method, request.path, int(status[:3])))
        response = web.Response(status=int(status[:3]), body=body)
        for name, value in headers:
            if name.lower() not in {"content-length", "connection", "transfer-encoding"}:
                response.headers.add(name, value)
        return response

    def _ensure(self, user: str) -> None:
        """The user's principal and primary calendar, made at their first request."""
        with self._lock:
            if user not in self._users:
                self._make_primary(user)
                self._users.add(user)

    def _make_primary(self, user: str) -> None:
        body = ('<?xml version="1.0" encoding="utf-8"?><c:mkcalendar xmlns:d="DAV:" '
                'xmlns:c="urn:ietf:params:xml:ns:caldav"><d:set><d:prop>'
                f'<d:displayname>{user}</d:displayname></d:prop></d:set></c:mkcalendar>')
        self._call("PROPFIND", f"/{user}/", user, {"HTTP_DEPTH": "0"}, b"")  # Radicale creates the principal
        status, _, _ = self._call("MKCALENDAR", f"/{user}/events/", user, {}, body.encode())
        assert status[:3] in {"201", "405", "409"}, status

    def _radicale(self) -> Any:
        with self._lock:
            if self._app is None:
                import radicale
                from radicale import config

                configuration = config.load()
                configuration.update({
                    "auth": {"type": "http_x_remote_user"}, "rights": {"type": "owner_only"},
                    "storage": {"filesystem_folder": str(self.storage)}, "web": {"type": "none"},
                    "logging": {"level": "warning"}}, "google_caldav", privileged=True)
                self._app = radicale.Application(configuration)
            return self._app

    def _call(self, method: str, path: str, user: str, extra: dict[str, str],
              body: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
        """One WSGI request to Radicale as `user`, under the /caldav/v2 prefix."""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method, "SCRIPT_NAME": PREFIX, "PATH_INFO": unquote(path), "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": self.oauth.base_url.rsplit(":", 1)[-1],
            "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": self.oauth.base_url[8:],
            "wsgi.version": (1, 0), "wsgi.url_scheme": "https", "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
            "wsgi.run_once": False, "CONTENT_LENGTH": str(len(body)), **extra, "HTTP_X_REMOTE_USER": user}
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer.update(status=status, headers=headers)
            return lambda data: None

        chunks = self._radicale()(environ, start_response)
        data = b"".join(chunks)
        return answer["status"], answer["headers"], data
