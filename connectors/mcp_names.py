"""Model-visible names for MCP servers and their tools: `mcp-<server>` and `mcp_<server>_<tool>`.

Providers accept tool names of at most 64 characters from `[a-zA-Z0-9_-]`. The rules: other characters
become `_`; a name over the limit keeps its prefix and ends in `_` plus 8 hex digits of the SHA-256 of
the full original name; when two tools of one server end up with the same name, the one whose name was
already valid keeps it and the others get the suffix; two servers whose names end up the same are a
configuration error, found at start.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_NAME = 64
_SUFFIX_HEX = 8
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class NameCollision(ValueError):
    """Two configured servers would share one toolset name."""


def sanitise(name: str) -> str:
    """`name` with every character outside `[a-zA-Z0-9_-]` replaced by `_`."""
    return _UNSAFE.sub("_", name)


def _suffixed(clean: str, original: str) -> str:
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:_SUFFIX_HEX]
    return f"{clean[:MAX_NAME - _SUFFIX_HEX - 1]}_{digest}"


def fit(name: str) -> str:
    """A valid name for `name`: sanitised, and shortened with a hash suffix when over the limit."""
    clean = sanitise(name)
    return clean if len(clean) <= MAX_NAME else _suffixed(clean, name)


def toolset_name(server: str) -> str:
    return f"mcp-{sanitise(server)}"


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Model-visible name for each of one server's tool names (remote name -> visible name), unique."""
    originals = {tool: f"mcp_{sanitise(server)}_{tool}" for tool in dict.fromkeys(tools)}
    fitted = {tool: fit(full) for tool, full in originals.items()}
    # Who keeps a contested name: a tool whose full name needed no change.
    keeper = {fitted[t]: t for t, full in originals.items() if fitted[t] == full}
    out: dict[str, str] = {}
    taken: set[str] = set()
    for tool, name in fitted.items():
        contested = sum(1 for n in fitted.values() if n == name) > 1
        if contested and keeper.get(name) != tool:
            name = _suffixed(sanitise(originals[tool]), originals[tool])
        if name in taken:  # two changed names hashing alike: practically never; still, never share
            name = _suffixed(name, f"{originals[tool]}#{len(taken)}")
        taken.add(name)
        out[tool] = name
    return out


def check_servers(servers: Iterable[str]) -> None:
    """Raise NameCollision when two server names give the same toolset (and tool prefix)."""
    seen: dict[str, str] = {}
    for server in servers:
        key = sanitise(server)
        if key in seen:
            raise NameCollision(f"MCP servers {seen[key]!r} and {server!r} both become toolset "
                                f"'mcp-{key}'; rename one of them")
        seen[key] = server
