"""The gateway's MCP servers: `[mcp.servers.*]` config -> the connector manager and the `mcp-<server>`
toolsets, kept in step with each server's tool list.

The toolset objects are created once, at construction, and stay in the gateway's toolset list for the
life of the process; when a server's tool list arrives or changes, its toolset's tools are replaced in
place and `on_change` lets the gateway re-index its tools by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from connectors.mcp import McpManager, McpServer, McpServerSettings
from gateway.config import McpServerConfig
from toolsets.base import ExecutionPolicy, Toolset
from toolsets.mcp import ServerSpec, fill, new_toolset

log = logging.getLogger(__name__)

START_WAIT_S = 10.0  # at start, how long the gateway waits for servers before answering without them


def server_settings(name: str, cfg: McpServerConfig) -> McpServerSettings:
    return McpServerSettings(name=name, command=cfg.command, args=cfg.args, env=cfg.env, url=cfg.url,
                             headers=cfg.headers, timeout_s=cfg.timeout_s)


def server_spec(name: str, cfg: McpServerConfig) -> ServerSpec:
    return ServerSpec(name=name, policy=ExecutionPolicy(cfg.policy), keywords=tuple(cfg.keywords), guests=cfg.guests)


class McpTools:
    """The given servers' manager and toolsets (the gateway passes the enabled ones)."""

    def __init__(self, servers: dict[str, McpServerConfig], **server_options: object) -> None:
        self.specs = {name: server_spec(name, cfg) for name, cfg in servers.items()}
        self.toolsets: dict[str, Toolset] = {name: new_toolset(spec) for name, spec in self.specs.items()}
        self.on_change: Callable[[], None] | None = None
        self.manager = McpManager([server_settings(n, c) for n, c in servers.items()], self._update, **server_options)

    async def start(self, wait_s: float = START_WAIT_S) -> None:
        await self.manager.start(wait_s)

    def _update(self, server: McpServer) -> None:
        toolset = self.toolsets[server.name]
        taken = {t.name: ts.name for ts in self.toolsets.values() if ts is not toolset for t in ts.tools}
        fill(toolset, self.specs[server.name], server.tools, taken)
        log.info("mcp_tools_listed server=%s tools=%d", server.name, len(toolset.tools))
        if self.on_change is not None:
            self.on_change()
