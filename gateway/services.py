"""The services tools reach through `ToolContext.service(name)`: connectors and gateway services.

A connector is registered only when its config section exists, which is what makes its toolset
appear for the model (toolsets name the service they require).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from connectors.calendar import CalendarClient, CalendarNotFound, CalendarSettings
from connectors.email import EmailClient, EmailSettings
from gateway.config import CalendarConfig, Config, EmailConfig, secret
from gateway.scheduler import AutomationService
from toolsets.memory import MemoryLimits

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


def email_client(cfg: EmailConfig) -> EmailClient:
    settings = cfg.model_dump(exclude={"password_env", "smtp_password_env"})
    smtp_password = (secret(cfg.smtp_password_env) or "") if cfg.smtp_password_env else None
    return EmailClient(EmailSettings(**settings, password=secret(cfg.password_env) or "", smtp_password=smtp_password))


def calendar_client(cfg: CalendarConfig) -> CalendarClient:
    return CalendarClient(CalendarSettings(url=cfg.url, username=cfg.username, password=secret(cfg.password_env) or "",
                                           default_calendar=cfg.default_calendar, timeout=cfg.timeout_s))


def connectors(config: Config) -> dict[str, Any]:
    """The configured connectors by service name. Building one opens no connection."""
    out: dict[str, Any] = {}
    if config.email is not None:
        out["email"] = email_client(config.email)
    if config.calendar is not None:
        out["calendar"] = calendar_client(config.calendar)
    return out


async def build_services(gateway: "Gateway") -> dict[str, Any]:
    services: dict[str, Any] = {"surfaces": SurfaceStatus(gateway), **connectors(gateway.config),
                                "memory": MemoryLimits(max_chars=gateway.config.runtime.memory_max_chars)}
    services["automations"] = AutomationService(gateway.store, gateway.config.tz, gateway.outbox.enqueue,
                                                gateway.run_prompt)
    return services


async def connector_checks(config: Config) -> list[tuple[str, str, str]]:
    """`anyy doctor` lines for each configured connector: reachable and logged in, or why not."""
    lines: list[tuple[str, str, str]] = []
    for name, client in connectors(config).items():
        try:
            if name == "email":
                st = await client.status()
                if not st.reachable:
                    lines.append(("✗", "email", f"IMAP: {st.imap}; SMTP: {st.smtp}"))
                else:
                    lines.append(("✓", "email", f"{st.account}: {st.messages} messages, {st.unseen} unseen; SMTP {st.smtp}"))
            else:
                cals = await client.calendars()
                lines.append(("✓", "calendar", f"{len(cals)} calendar(s): {', '.join(c.name for c in cals)[:120]}"))
                if client.settings.default_calendar:
                    try:
                        await client.calendar()
                    except CalendarNotFound as exc:  # new events would have nowhere to go
                        lines.append(("✗", "calendar", f"[calendar] default_calendar matches nothing: {exc}"))
        except Exception as exc:  # doctor reports every failure as a line, never a traceback
            lines.append(("✗", name, str(exc)))
        finally:
            await client.aclose()
    return lines
