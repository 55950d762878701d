"""The owner's dashboard: the runtime at a glance in a browser, served by `anyy run` (see docs/dashboard.md).

`auth` (token, sessions, CSRF), `server` (the aiohttp app and `Dashboard`), `pages` (GET) and `actions`
(POST), `catalog` and `health` (what the pages show), `context` (what every handler reaches).
"""

from gateway.dashboard.auth import DashboardError, load_or_create_token, login_url
from gateway.dashboard.server import Dashboard

__all__ = ["Dashboard", "DashboardError", "load_or_create_token", "login_url"]
