"""A Socket Mode connection that cannot go silently deaf.

slack-sdk's own reconnect logic has known ways to stop hearing Slack while looking connected (a monitor
task that dies, a reconnect that fails once and never again: slack-sdk issues 1110, 1446, 1701). So the
SDK's automatic reconnect is switched off and this watchdog owns the policy: the connection is alive while
frames arrive — envelopes, or pongs to the pings the SDK sends every `ping_interval` — and when it is
closed, or nothing has arrived for `stale_s`, the whole client is replaced by a fresh one (new
apps.connections.open URL, new websocket, new HTTP session). Unacknowledged envelopes are redelivered by
Slack, so nothing is lost in the swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import WSMessage
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 30.0  # a first connection that takes longer than this fails start()
_CLOSE_TIMEOUT_S = 2.0  # a dead peer may never answer the close handshake


class SocketConnection:
    """The Socket Mode link of one Bolt app, with its watchdog."""

    def __init__(self, app: AsyncApp, app_token: str, stale_s: float) -> None:
        self._app = app
        self._app_token = app_token
        self._stale_s = stale_s
        self._ping_interval = min(10.0, stale_s / 3)  # several pongs per stale window
        self._tick = min(self._ping_interval, stale_s / 4)
        self._handler: AsyncSocketModeHandler | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._last_frame = 0.0
        self._connected_at = 0.0
        self.connections = 0  # how many websockets this link has opened, for status and logs

    @property
    def connected(self) -> bool:
        session = self._handler.client.current_session if self._handler else None
        return session is not None and not session.closed

    async def start(self) -> None:
        """Open the first connection; raises RuntimeError when Slack refuses the app token."""
        handler = self._new_handler()
        try:
            handler.client.wss_uri = await handler.client.issue_new_wss_url()
            await asyncio.wait_for(self._connect(handler), _CONNECT_TIMEOUT_S)
        except (SlackApiError, TimeoutError) as exc:
            await self._close(handler)
            reason = exc.response.get("error") if isinstance(exc, SlackApiError) else "timeout"
            raise RuntimeError(f"slack: cannot open a Socket Mode connection ({reason}); check the app-level "
                               "token (xapp-…, scope connections:write) and that Socket Mode is on") from None
        self._watchdog = asyncio.create_task(self._watch(), name="slack-socket-watchdog")

    async def stop(self) -> None:
        """Stop watching and close the connection."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        if self._handler is not None:
            await self._close(self._handler)
            self._handler = None

    def _new_handler(self) -> AsyncSocketModeHandler:
        handler = AsyncSocketModeHandler(self._app, self._app_token, ping_interval=self._ping_interval)
        handler.client.default_auto_reconnect_enabled = False
        handler.client.auto_reconnect_enabled = False
        handler.client.on_message_listeners.append(self._on_frame)
        return handler

    async def _on_frame(self, _message: WSMessage) -> None:
        self._last_frame = time.time()

    async def _connect(self, handler: AsyncSocketModeHandler) -> None:
        self._handler = handler
        await handler.connect_async()  # retries by itself until it connects or is closed
        self._connected_at = time.time()
        self.connections += 1
        log.info("slack_socket_connected connections=%d", self.connections)

    def _idle_s(self, handler: AsyncSocketModeHandler) -> float:
        # The SDK records, on each pong, the time its ping was sent (time.time() based, like ours).
        last_pong = handler.client.last_ping_pong_time or 0.0
        return time.time() - max(self._last_frame, self._connected_at, last_pong)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._tick)
            handler = self._handler
            if handler is None or handler.client.connect_operation_lock.locked():
                continue  # the SDK is following a "disconnect: refresh_requested" envelope; let it finish
            idle = self._idle_s(handler)
            if not self.connected:
                reason = "closed"
            elif idle > self._stale_s:
                reason = "stale"
            else:
                continue
            log.warning("slack_socket_reconnect reason=%s idle_s=%.1f stale_s=%.1f", reason, idle, self._stale_s)
            try:
                await self._close(handler)
                await self._connect(self._new_handler())
            except Exception:  # the watchdog must outlive any one failed attempt, or the link goes deaf
                log.exception("slack_socket_reconnect_failed")

    @staticmethod
    async def _close(handler: AsyncSocketModeHandler) -> None:
        try:
            await asyncio.wait_for(handler.close_async(), _CLOSE_TIMEOUT_S)
        except Exception as exc:  # a broken socket may fail to close in many ways; it is abandoned anyway
            log.info("slack_socket_close_failed error=%s", type(exc).__name__)
