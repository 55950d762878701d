"""The owner's dashboard: the runtime at a glance in a browser, served by `anyy run` (see docs/dashboard.md).

`auth` (token, sessions, CSRF), `server` (the aiohttp app and `Dashboard`), `pages` (GET) and `actions`
(POST), `catalog` and `health` (what the pages show), `context` (what every handler reaches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.dashboard.auth import DashboardError, load_or_create_token, login_url

if TYPE_CHECKING:
    from gateway.dashboard.server import Dashboard


def __getattr__(name: str) -> Any:
    """`Dashboard` is imported on first use: the server brings aiohttp and Jinja2, which the other CLI
    commands (`anyy dashboard url` included) do not need."""
    if name == "Dashboard":
        from gateway.dashboard.server import Dashboard
        return Dashboard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Dashboard", "DashboardError", "load_or_create_token", "login_url"]
