"""MCP client manager: one supervised connection per configured server, over the official `mcp` SDK.

Each server runs in its own task: connect (stdio child process or streamable HTTP), fetch and cache the
tool list, then watch the connection. The list is fetched again when the server announces a change
(`notifications/tools/list_changed` on handshake-era connections, a `subscriptions/listen` event on
2026-07-28 ones) and on a periodic health check, which is also how a dead connection is noticed between
calls. A server that fails to start or dies is marked down, logged, and retried with exponential
backoff; its cached tools stay, and a call meanwhile fails with a clear `McpUnavailable`. Nothing here
knows about models or chats.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack, suppress
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

# The child's environment: what its config lists, plus only these from ours.
INHERITED_ENV = ("PATH", "HOME", "LANG")
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
HEALTH_INTERVAL_S = 30.0
_MAX_PAGES = 100
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

State = Literal["starting", "up", "down", "stopped"]


class McpFailure(Exception):
    """A call that could not be made or answered; the message is for the model and the owner."""


class McpUnavailable(McpFailure):
    """The server is not connected (starting, down and being restarted, or stopped)."""


class McpRefused(McpFailure):
    """The server answered a call with a protocol error; the message quotes the server."""


class McpServerSettings(BaseModel):
    """One server: `command` (stdio) or `url` (streamable HTTP). `${VAR}` in `env` and `headers` values
    is taken from this process's environment when the connection is made."""

    name: str
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = 30.0

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def expand(value: str, environ: Mapping[str, str] | None = None) -> str:
    """`value` with each `${VAR}` replaced from the environment; an unset variable is an error."""
    env = os.environ if environ is None else environ

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise McpFailure(f"${{{m.group(1)}}} is not set in the environment")
        return env[m.group(1)]

    return _VAR.sub(one, value)


def child_environment(configured: Mapping[str, str]) -> dict[str, str]:
    """The stdio child's whole environment: PATH/HOME/LANG from ours, then the configured variables."""
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update({k: expand(v) for k, v in configured.items()})
    return env


def describe_error(exc: BaseException) -> str:
    """One line for an exception, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, McpFailure):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class McpServer:
    """One server's supervised connection and its cached tool list."""

    def __init__(self, settings: McpServerSettings, on_tools: Callable[[McpServer], None] | None = None, *,
                 health_interval_s: float = HEALTH_INTERVAL_S, backoff_start_s: float = BACKOFF_START_S) -> None:
        self.settings = settings
        self.name = settings.name
        self.on_tools = on_tools
        self.health_interval_s = health_interval_s
        self.backoff_start_s = backoff_start_s
        self.tools: list[types.Tool] = []
        self.state: State = "starting"
        self.error = ""
        self.restarts = 0  # connections lost or refused since start
        self.connects = 0  # connections made
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()  # the first attempt has ended (up, or down)
        self._changed = asyncio.Event()  # fetch the tool list again
        self._broken = asyncio.Event()  # a call found the connection closed
        self._stop = asyncio.Event()

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def wait_settled(self, timeout: float) -> None:
        """Wait until the first connection attempt has succeeded or failed (at most `timeout`)."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), self.settings.timeout_s)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        self.state, self._client = "stopped", None

    def status(self) -> str:
        """"up (2 tools)", "down: <why> (restarting)", "starting", "stopped"."""
        if self.state == "up":
            return f"up ({len(self.tools)} tools)"
        if self.state == "down":
            return f"down: {self.error} (restarting with backoff)"
        return self.state

    async def _supervise(self) -> None:
        delay = self.backoff_start_s
        while not self._stop.is_set():
            try:
                await self._connected_session()
                reason = "connection lost"
            except Exception as exc:  # any failure of one server must leave the others (and Anyy) running
                reason = describe_error(exc)
            self._client = None
            if self._stop.is_set():
                break
            if self.state == "up":
                delay = self.backoff_start_s  # it was working: retry soon
            self.state, self.error = "down", reason
            self.restarts += 1
            self._settled.set()
            log.warning("mcp_server_down server=%s transport=%s error=%s retry_in_s=%.1f", self.name,
                        self.settings.transport, reason, delay)
            with suppress(TimeoutError):  # the backoff ran out: reconnect
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
        self.state = "stopped"

    async def _connected_session(self) -> None:
        """Connect, fetch the tools, and return when the connection is lost or the server stops."""
        timeout = self.settings.timeout_s
        async with AsyncExitStack() as stack:
            client = Client(await self._transport(stack), message_handler=self._on_message,
                            read_timeout_seconds=timeout, client_info=types.Implementation(name="anyy", version="0.1"))
            async with asyncio.timeout(timeout):
                await stack.enter_async_context(client)
            self._broken.clear()
            await self._fetch_tools(client)
            self._client, self.state, self.error = client, "up", ""
            self.connects += 1
            self._settled.set()
            log.info("mcp_server_up server=%s transport=%s protocol=%s tools=%d", self.name,
                     self.settings.transport, client.protocol_version, len(self.tools))
            watcher = self._listen(client)
            try:
                await self._watch(client)
            finally:
                self._client = None
                if watcher is not None:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)

    async def _transport(self, stack: AsyncExitStack) -> Any:
        s = self.settings
        if s.command:
            env = child_environment(s.env)
            command = shutil.which(s.command, path=env.get("PATH"))
            if command is None:
                raise McpFailure(f"command {s.command!r} not found on PATH")
            # The SDK adds a few variables of ours (USER, SHELL, ...) to the child's environment;
            # `env -u` removes them again, so the child sees exactly `env`.
            extra = sorted(set(get_default_environment()) - set(env))
            unset = [arg for name in extra for arg in ("-u", name)]
            params = StdioServerParameters(command=shutil.which("env") or "/usr/bin/env",
                                           args=[*unset, command, *s.args], env=env)
            return stdio_client(params)
        headers = {k: expand(v) for k, v in s.headers.items()}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(s.timeout_s, read=300)))
        return streamable_http_client(s.url, http_client=http)

    async def _fetch_tools(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        changed = [t.model_dump(mode="json") for t in tools] != [t.model_dump(mode="json") for t in self.tools]
        self.tools = tools
        if changed and self.on_tools is not None:
            self.on_tools(self)

    def _listen(self, client: Client) -> asyncio.Task[None] | None:
        """On a 2026-07-28 connection whose server announces list changes, a task that follows them."""
        caps = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or caps is None or not caps.list_changed:
            return None

        async def follow() -> None:
            try:
                async with client.listen(tools_list_changed=True) as sub:
                    async for _ in sub:
                        self._changed.set()
            except SubscriptionLost:
                self._broken.set()
            except Exception as exc:  # listening is an optimisation; the health check still refreshes
                log.warning("mcp_listen_failed server=%s error=%s", self.name, describe_error(exc))

        return asyncio.create_task(follow(), name=f"mcp-{self.name}-listen")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed.set()

    async def _watch(self, client: Client) -> None:
        """Refresh the tool list on change and on each health interval; return when the connection is
        found broken or the server is stopped."""
        while True:
            waits = [asyncio.create_task(e.wait()) for e in (self._changed, self._broken, self._stop)]
            await asyncio.wait(waits, timeout=self.health_interval_s, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
            if self._stop.is_set() or self._broken.is_set():
                return
            self._changed.clear()
            await self._fetch_tools(client)  # raises when the connection is gone

    # -- calls ------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call `tool`; raises McpUnavailable when not connected, McpFailure on a protocol error or
        timeout. A result with `is_error` is returned as is (the tool's own failure)."""
        client = self._client
        if client is None or self.state != "up":
            raise McpUnavailable(f"MCP server '{self.name}' is {self.status()}; try again later")
        timeout = self.settings.timeout_s
        try:
            async with asyncio.timeout(timeout + 1):  # the SDK's read timeout, and a hard stop behind it
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self._broken.set()
                raise McpUnavailable(f"MCP server '{self.name}' closed the connection; it is being restarted, "
                                     "try again in a moment") from None
            if exc.code == types.REQUEST_TIMEOUT:
                raise McpFailure(f"MCP server '{self.name}' did not answer {tool} within {timeout:g}s") from None
            raise McpRefused(f"MCP server '{self.name}' refused {tool}: {exc.message}") from None
        except TimeoutError:
            raise McpFailure(f"MCP server '{self.name}' did not answer {tool} within {timeout:g}s") from None
        except Exception as exc:  # a malformed answer, a transport fault: the model reads why
            raise McpRefused(f"MCP server '{self.name}' failed on {tool}: {describe_error(exc)}") from None


class McpManager:
    """Every configured server, started together; the service tools reach as `ctx.service("mcp")`."""

    def __init__(self, settings: list[McpServerSettings], on_tools: Callable[[McpServer], None] | None = None,
                 **server_options: Any) -> None:
        self.servers = {s.name: McpServer(s, on_tools, **server_options) for s in settings}

    async def start(self, wait_s: float = 10.0) -> None:
        """Start every server and wait (at most `wait_s`) for each first attempt, so the tool lists of
        the servers that are up are known when the gateway starts answering."""
        for server in self.servers.values():
            server.start()
        await asyncio.gather(*(s.wait_settled(wait_s) for s in self.servers.values()))

    def server(self, name: str) -> McpServer | None:
        return self.servers.get(name)

    async def health(self) -> list[tuple[str, bool, str]]:
        """(server, up?, state) per server: the dashboard's health page shows them as its own section."""
        return [(name, server.state == "up", server.status()) for name, server in self.servers.items()]

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        found = self.servers.get(server)
        if found is None:
            raise McpUnavailable(f"MCP server '{server}' is not configured")
        return await found.call(tool, arguments)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()))
