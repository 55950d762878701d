"""What the tools and toolsets pages show: the catalog with effective policies, and recent selections."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pydantic import BaseModel

from gateway.approvals.policy import effective_descriptor
from gateway.config import GovernanceConfig
from gateway.selection.selector import Selection, schema_bytes, tools_for
from gateway.services.availability import Availability
from store.records import SessionRecord
from toolsets.base import Tool, Toolset
from toolsets.loader import loader_tool


class ToolRow(BaseModel):
    name: str
    description: str
    risk: str
    approval: str
    execution: str
    effective_approval: str
    effective_execution: str
    visible_chars: int
    stored_chars: int
    steering: bool

    @property
    def overridden(self) -> bool:
        return (self.approval, self.execution) != (self.effective_approval, self.effective_execution)


class ToolsetRow(BaseModel):
    name: str
    description: str
    available: bool
    why_not: str = ""  # empty when available
    guests: bool
    schema_bytes: int
    tools: list[ToolRow]


class SelectionRow(BaseModel):
    """The last selection of one session: what was sent and how many bytes of schemas."""

    session_id: str
    user_key: str
    updated_at: str
    pinned: bool
    names: list[str]
    reasons: dict[str, str]
    unavailable: list[str]
    schema_bytes: int


def _tool_row(tool: Tool, governance: GovernanceConfig) -> ToolRow:
    d, eff = tool.descriptor, effective_descriptor(tool, governance)
    return ToolRow(name=tool.name, description=tool.description, risk=str(d.risk), approval=str(d.approval),
                   execution=str(d.execution), effective_approval=str(eff.approval),
                   effective_execution=str(eff.execution), visible_chars=d.output_budget.visible_chars,
                   stored_chars=d.output_budget.stored_chars, steering=d.steering)


def _why_not(ts: Toolset, enabled: Collection[str], avail: Availability, services: Collection[str]) -> str:
    if ts.name not in enabled:
        return "disabled in this runtime"
    return avail.why_absent(ts.requires, services)


def catalog(known: Sequence[Toolset], enabled: Sequence[Toolset], avail: Availability, services: Collection[str],
            governance: GovernanceConfig, guest_may_use: Callable[[str], bool]) -> list[ToolsetRow]:
    """Every known toolset (registry order, then any built at run time such as MCP servers'), whether
    the model can have it in this runtime and why not, whether guests get it (`[access] guest_toolsets`
    or the toolset's own `guests`), and each tool's declared and effective policy."""
    names = {ts.name for ts in enabled}
    ordered = [*known, *(ts for ts in enabled if ts.name not in {k.name for k in known})]
    rows = []
    for ts in ordered:
        why = _why_not(ts, names, avail, services)
        rows.append(ToolsetRow(name=ts.name, description=ts.description, available=not why, why_not=why,
                               guests=guest_may_use(ts.name), schema_bytes=schema_bytes(ts.tools),
                               tools=[_tool_row(t, governance) for t in ts.tools]))
    return rows


def selections(sessions: Sequence[SessionRecord], available: Sequence[Toolset]) -> list[SelectionRow]:
    """The last selection of each session that has one, with the bytes of the tools array it sent
    (the loader plus the selected toolsets, as the runtime builds it)."""
    loader = loader_tool(available)
    rows = []
    for s in sessions:
        if not s.last_selection:
            continue
        sel = Selection.model_validate(s.last_selection)
        rows.append(SelectionRow(session_id=s.id, user_key=s.user_key, updated_at=s.updated_at, pinned=sel.pinned,
                                 names=sel.names, reasons=sel.reasons, unavailable=sel.unavailable,
                                 schema_bytes=schema_bytes(tools_for(sel.names, available, loader))))
    return rows
