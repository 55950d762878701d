"""The always-present `load_toolsets` tool: the model's way to fetch a toolset the selector left out.

Its description lists the toolsets that exist in this runtime (those whose connectors are configured),
one line each. It is built once per set of available toolsets, so its bytes are identical from turn to
turn and prompt caches keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from toolsets.base import Descriptor, Tool, ToolContext, ToolError, Toolset

LOADER_TOOLSET = "loader"

_INTRO = "Load toolsets whose tools you need but do not have; they stay loaded for this turn. Available:"


def loader_tool(available: Sequence[Toolset]) -> Tool:
    """The loader tool for these available toolsets (the same object for the same toolsets)."""
    return _build(tuple((ts.name, ts.description) for ts in available))


@lru_cache(maxsize=16)
def _build(entries: tuple[tuple[str, str], ...]) -> Tool:
    known = [name for name, _ in entries]

    async def load_toolsets(ctx: ToolContext, names: list[str]) -> str:
        """Args:
            names: Toolset names from the list.
        """
        wanted = list(dict.fromkeys(names))  # keep order, drop repeats
        unknown = [n for n in wanted if n not in known]
        valid = [n for n in wanted if n in known]
        if not valid:
            raise ToolError(f"unknown toolset(s): {', '.join(unknown) or '(none given)'}; "
                            f"available: {', '.join(known)}")
        ctx.load_toolsets(valid)
        note = f" Unknown, ignored: {', '.join(unknown)}." if unknown else ""
        return f"Loaded: {', '.join(valid)}. Their tools are available now.{note}"

    description = "\n".join([_INTRO, *(f"- {name}: {text}" for name, text in entries)])
    return Tool(name="load_toolsets", toolset=LOADER_TOOLSET, description=description, handler=load_toolsets,
                descriptor=Descriptor())
