"""`anyy mcp list` and `anyy mcp probe NAME`, and the MCP parts of `anyy tools` and `anyy doctor`.

Each command connects to the servers itself (start, list, stop), as a resident process would, so what
it shows is what Anyy would see now. The tool list of a resident process is not read from it.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the MCP SDK takes most of a second to import: only code that talks to a server loads it
    from connectors.mcp import McpServer
    from gateway.config import Config
    from gateway.services.mcp import McpTools
    from toolsets.base import Toolset

PROBE_WAIT_S = 15.0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("mcp", parents=[common], help="the configured MCP servers")
    a = p.add_subparsers(dest="action", required=True)
    a.add_parser("list", parents=[common], help="every configured server: state and tools").set_defaults(fn=mcp_list)
    x = a.add_parser("probe", parents=[common], help="start one server, list its tools with their policy, stop it")
    x.add_argument("name")
    x.set_defaults(fn=mcp_probe)


@asynccontextmanager
async def connected(config: Config, names: list[str]) -> AsyncIterator[McpTools]:
    """The named servers, started (first attempt settled) and stopped again on exit."""
    from gateway.services.mcp import McpTools
    tools = McpTools({n: config.mcp.servers[n] for n in names}, backoff_start_s=PROBE_WAIT_S)
    waits = [config.mcp.servers[n].timeout_s for n in names]
    await tools.start(min(max(waits, default=0), PROBE_WAIT_S) + 1)
    try:
        yield tools
    finally:
        await tools.manager.aclose()


def _where(server: McpServer) -> str:
    s = server.settings
    return f"stdio {s.command}" if s.command else f"http {s.url}"


async def mcp_list(config: Config, args: argparse.Namespace) -> int:
    servers = config.mcp.servers
    if not servers:
        print("No MCP servers configured ([mcp.servers.NAME] in the config).")
        return 0
    enabled = [n for n, s in servers.items() if s.enabled]
    async with connected(config, enabled) as live:
        for name in servers:
            server = live.manager.server(name)
            if server is None:
                print(f"{name}: disabled")
                continue
            print(f"{name}: {server.status()} — {_where(server)}")
            for tool in live.toolsets[name].tools:
                print(f"  {tool.name}")
        all_up = all(live.manager.servers[n].state == "up" for n in enabled)
    return 0 if all_up else 1


async def mcp_probe(config: Config, args: argparse.Namespace) -> int:
    from gateway.config import ConfigError
    if args.name not in config.mcp.servers:
        known = ", ".join(config.mcp.servers) or "none"
        raise ConfigError(f"no MCP server {args.name!r} in {config.source} (configured: {known})")
    async with connected(config, [args.name]) as live:
        server = live.manager.servers[args.name]
        note = "" if config.mcp.servers[args.name].enabled else " (disabled in config: probed anyway)"
        print(f"{args.name}: {server.status()} — {_where(server)}{note}")
        for line in tool_lines(config, live.toolsets[args.name]):
            print(f"  {line}")
        up = server.state == "up"
    return 0 if up else 1


def tool_lines(config: Config, toolset: Toolset) -> list[str]:
    from gateway.approvals.policy import effective_descriptor
    out = []
    for tool in toolset.tools:
        d = effective_descriptor(tool, config.tool_governance)
        out.append(f"{tool.name:<40} {d.risk:<13} {d.execution:<8} {tool.description.splitlines()[0][:60]}")
    return out


async def tool_rows(config: Config) -> tuple[list[dict[str, Any]], list[str]]:
    """`anyy tools` rows for the enabled servers' tools, and a note for each server that is down."""
    enabled = list(config.mcp.enabled)
    if not enabled:
        return [], []
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    async with connected(config, enabled) as live:
        for name in enabled:
            server, ts = live.manager.servers[name], live.toolsets[name]
            if server.state != "up":
                notes.append(f"{ts.name}: {server.status()}")
            rows += [{"toolset": ts.name, "tool": t.name, "risk": str(t.descriptor.risk),
                      "approval": str(t.descriptor.approval), "execution": str(t.descriptor.execution),
                      "visible_chars": t.descriptor.output_budget.visible_chars, "requires": ts.requires,
                      "available": server.state == "up",
                      **({} if server.state == "up" else {"why_not": server.status()})} for t in ts.tools]
    return rows, notes


async def doctor_checks(config: Config) -> list[tuple[str, str, str]]:
    """`anyy doctor` lines: each enabled server reachable with its tools, or why not."""
    enabled = list(config.mcp.enabled)
    if not enabled:
        return []
    lines: list[tuple[str, str, str]] = []
    async with connected(config, enabled) as live:
        for name in enabled:
            server = live.manager.servers[name]
            if server.state == "up":
                lines.append(("✓", f"mcp {name}", f"{server.status()} over {server.settings.transport}"))
            else:
                lines.append(("✗", f"mcp {name}", f"{server.status()} — {_where(server)}"))
    return lines

