"""The services tools reach through `ToolContext.service(name)`: connectors and gateway services.

A connector is registered only when its config section exists, which is what makes its toolset
appear for the model (toolsets name the service they require).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.app import Gateway


class SurfaceStatus(Mapping[str, str]):
    """Live status of each configured surface: "up", "down: <why>", or the surface's own word."""

    def __init__(self, gateway: "Gateway") -> None:
        self.gateway = gateway

    def __getitem__(self, name: str) -> str:
        started = self.gateway.started.get(name)
        if started is None:
            raise KeyError(name)
        surface = next(s for s in self.gateway.surfaces if s.name == name)
        return surface.status() if started == "up" else started

    def __iter__(self) -> Iterator[str]:
        return iter(self.gateway.started)

    def __len__(self) -> int:
        return len(self.gateway.started)


async def build_services(gateway: "Gateway") -> dict[str, Any]:
    return {"surfaces": SurfaceStatus(gateway)}
