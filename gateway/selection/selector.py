"""Toolset selection: which toolsets' schemas go with this turn's model request, and why.

Deterministic and cheap: precompiled keyword regexes behind substring tests (`gateway.selection.keywords`),
then the meaning layer (`gateway.selection.meaning`, BM25 over the toolsets' descriptions and example
requests) and the vector layer (`gateway.selection.vectors`, a classifier over static word embeddings)
for what no keyword names; a toolset is offered when any of them says so, except a BM25 match the vector
layer finds very unlikely. No model call. The inputs are the message text, whether it has attachments,
the toolsets the session used in its last turns, the session's pins, and the toolsets available in this
runtime (connector toolsets only when their connector is configured; the caller decides that, and
nothing outside `available` is ever selected). Keywords belong to each toolset's own module; this module
reads them generically.

The tools array is built in one fixed order (the loader, then the registry order of `available`), so the
same selection gives byte-identical schemas and provider prompt caches keep hitting.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from gateway.selection import vectors
from gateway.selection.keywords import matcher
from gateway.selection.meaning import index_for
from store.records import MessageRecord
from toolsets.base import Descriptor, Tool, Toolset

log = logging.getLogger(__name__)

# Attachments bring this toolset when the runtime has it (the reference's artifact service).
ATTACHMENT_TOOLSET = "artifact"

_REASON_CHARS = 40
# A long message is mostly pasted material; the request to the assistant sits at its start or end. Only
# those parts are scanned, which also bounds selection time whatever the message length.
_SCAN_EDGE_CHARS = 1000


def _scanned(text: str) -> str:
    if len(text) <= 2 * _SCAN_EDGE_CHARS:
        return text
    return f"{text[:_SCAN_EDGE_CHARS]}\n{text[-_SCAN_EDGE_CHARS:]}"


class Selection(BaseModel):
    """The toolsets chosen for a turn (in available order) with one reason each; stored on the session
    so `/toolsets` can explain the last turn."""

    names: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)
    pinned: bool = False
    unavailable: list[str] = Field(default_factory=list)  # pinned names this runtime does not have


def select_toolsets(
    text: str,
    *,
    has_attachments: bool,
    recent: list[str],
    pins: list[str] | None,
    available: Sequence[Toolset],
) -> Selection:
    """Choose this turn's toolsets.

    With `pins` (a `/toolsets pin`), exactly the pinned toolsets that are available, nothing added.
    Otherwise: toolsets whose keywords occur in `text` (its start and end when it is long), those the
    meaning and vector layers find for it, toolsets in `recent` (used in the session's last
    turns, so a follow-up such as "yes, do it" keeps its tools), and the artifact toolset for attachments.
    """
    by_name = {ts.name: ts for ts in available}
    reasons: dict[str, str] = {}
    if pins is not None:
        for name in pins:
            if name in by_name:
                reasons[name] = "pinned"
        selection = Selection(names=_in_order(reasons, available), reasons=reasons, pinned=True,
                              unavailable=[n for n in pins if n not in by_name])
    else:
        scanned = _scanned(text)
        folded = scanned.casefold()
        for ts in available:
            match = matcher(ts.keywords).search(scanned, folded)
            if match:
                reasons[ts.name] = f"keyword '{match.group(0).strip()[:_REASON_CHARS]}'"
        table = vectors.table()
        probabilities = table.probabilities(scanned) if table is not None else {}
        for name, score in index_for(available).matches(scanned, keywords_found=set(reasons)).items():
            if table is None or not table.doubts(name, probabilities):
                reasons.setdefault(name, f"meaning (score {score:.1f})")
        if table is not None:
            found = table.matches(probabilities, by_name, others_found=bool(reasons))
            for name, probability in found.items():
                reasons.setdefault(name, f"vectors (p {probability:.2f})")
        for name in recent:
            if name in by_name:
                reasons.setdefault(name, "used in the last turns")
        if has_attachments and ATTACHMENT_TOOLSET in by_name:
            reasons.setdefault(ATTACHMENT_TOOLSET, "attachment")
        selection = Selection(names=_in_order(reasons, available), reasons=reasons)
    # Reasons quote the message, so they stay at DEBUG.
    log.debug("toolsets selected: %s", selection.reasons)
    return selection


def _in_order(chosen: dict[str, str], available: Sequence[Toolset]) -> list[str]:
    return [ts.name for ts in available if ts.name in chosen]


def tools_for(names: Sequence[str], available: Sequence[Toolset], loader: Tool) -> list[Tool]:
    """The tools to send: the loader first, then the named toolsets' tools in `available` order.

    The order never depends on the order of `names`, so equal selections give identical arrays.
    """
    wanted = set(names)
    return [loader, *(tool for ts in available if ts.name in wanted for tool in ts.tools)]


def schema_bytes(tools: Sequence[Tool]) -> int:
    """Size of the tools array as sent: compact JSON of the provider-neutral schemas."""
    return len(json.dumps([t.schema() for t in tools], separators=(",", ":")).encode())


def describe_selection(selection: Selection, available: Sequence[Toolset] = ()) -> str:
    """`/toolsets`: what the last turn selected and why, and how to change it."""
    mode = "pinned" if selection.pinned else "automatic"
    lines = [f"Toolsets of the last turn ({mode}):"]
    lines += [f"• {name}: {selection.reasons.get(name, '')}" for name in selection.names] or ["• none"]
    lines.append("• load_toolsets: always there, so the model can load any other toolset")
    if selection.unavailable:
        lines.append(f"Pinned but not available here: {', '.join(selection.unavailable)}")
    if available:
        lines.append(f"Available: {', '.join(ts.name for ts in available)}")
    lines.append("Change with /toolsets pin NAME... or /toolsets auto.")
    return "\n".join(lines)


def describe_tools(tools: Sequence[Tool], descriptor: Callable[[Tool], Descriptor] | None = None) -> str:
    """`/tools`: the visible tools grouped by toolset, each with its risk and execution policy (as
    `descriptor` gives them: the effective one, after governance overrides), and the size of their schemas."""
    groups: dict[str, list[str]] = {}
    for tool in tools:
        d = descriptor(tool) if descriptor is not None else tool.descriptor
        groups.setdefault(tool.toolset, []).append(f"{tool.name} ({d.risk}, {d.execution})")
    size = schema_bytes(tools)
    lines = [f"{len(tools)} tools visible ({size / 1024:.1f} KB of schemas):"]
    lines += [f"• {toolset}: {', '.join(names)}" for toolset, names in groups.items()]
    return "\n".join(lines)


RECENT_TURNS = 2  # toolsets used this many turns back stay selected (follow-ups like "yes, send it")


def recent_toolsets(rows: list[MessageRecord], current_turn: str, toolset_of: dict[str, str]) -> list[str]:
    """Toolsets (by `toolset_of` tool name) whose tools were called in the last RECENT_TURNS turns of
    `rows` before `current_turn`."""
    turns: set[str] = set()
    used: set[str] = set()
    for m in reversed(rows):  # newest first; stop once past the turns that count
        if m.turn_id != current_turn and m.turn_id not in turns:
            if len(turns) == RECENT_TURNS:
                break
            turns.add(m.turn_id)
        if m.role == "tool" and m.turn_id != current_turn and m.tool_name in toolset_of:
            used.add(toolset_of[m.tool_name])
    return sorted(used)
