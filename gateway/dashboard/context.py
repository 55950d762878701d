"""What every dashboard handler reaches: the application's state keys, page rendering, redirects."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from gateway.dashboard.auth import WebSession, WebSessions
from store.records import dumps, parse_iso, utcnow

if TYPE_CHECKING:
    from gateway.app import Gateway

GATEWAY: web.AppKey[Gateway] = web.AppKey("gateway")
SESSIONS: web.AppKey[WebSessions] = web.AppKey("sessions")
TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("templates")
TOKEN: web.AppKey[str] = web.AppKey("token")
STYLESHEET: web.AppKey[bytes] = web.AppKey("stylesheet")
SESSION: web.RequestKey[WebSession] = web.RequestKey("session", WebSession)  # set by the guard


def templates(gateway: Gateway) -> jinja2.Environment:
    """Autoescaping Jinja2 over the package's templates; `local` shows a UTC stamp in the owner's zone."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("gateway.dashboard", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    tz = gateway.config.tz

    def local(stamp: str | None) -> str:
        return parse_iso(stamp).astimezone(tz).strftime("%Y-%m-%d %H:%M %Z") if stamp else "—"

    def when(stamp: str | None) -> Markup:
        """"in 2 h" / "5 min ago", with the owner's local time (and zone) on hover."""
        if not stamp:
            return Markup("—")
        return Markup('<time datetime="{}" title="{}">{}</time>').format(stamp, local(stamp),
                                                                         relative(parse_iso(stamp), utcnow()))

    env.filters["local"] = local
    env.filters["when"] = when
    env.filters["human"] = human
    env.globals["zone"] = tz.key
    return env


def human(detail: Any) -> str:
    """An audit detail as words: "kind: reminder · name: tea" (nested values stay compact JSON)."""
    if not isinstance(detail, dict):
        return dumps(detail)
    return " · ".join(f"{k.replace('_', ' ')}: {v if isinstance(v, (str, int, float)) else dumps(v)}"
                      for k, v in detail.items())


def relative(at: datetime, now: datetime) -> str:
    """A person's distance in time: "in 40 s", "in 2 h", "3 days ago", "just now"."""
    seconds = (at - now).total_seconds()
    size = abs(seconds)
    if size < 30:
        return "just now"
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if size >= length or unit == "s":
            count = round(size / length)
            label = f"{count} {'day' if unit == 'days' and count == 1 else unit}"
            return f"in {label}" if seconds > 0 else f"{label} ago"
    return "just now"


def gateway_of(request: web.Request) -> Gateway:
    return request.app[GATEWAY]


def render(request: web.Request, template: str, **context: Any) -> web.Response:
    """A page: the template with the session's CSRF token and its one-time flash message."""
    session = request[SESSION]
    html = request.app[TEMPLATES].get_template(template).render(
        csrf=session.csrf, flash=session.take_flash(), path=request.path, **context)
    return web.Response(text=html, content_type="text/html")


def see_other(location: str) -> web.Response:
    """Post/Redirect/Get: after an action, the browser loads the page again with GET."""
    return web.Response(status=303, headers={"Location": location})
