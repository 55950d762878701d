"""The services tools reach through `ToolContext.service(name)`: connectors and gateway services.

A connector is registered only when its config section exists, which is what makes its toolset
appear for the model (toolsets name the service they require); the mail and calendar accounts are
`gateway.services.accounts`'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from connectors.private_paths import PrivatePaths
from connectors.skills import SkillLibrary
from connectors.speech import EspeakEngine, OpenAISpeechEngine, SpeechEngine, Transcriber
from connectors.web import Guard, HostRules, SearchError, WebFetcher, extractor_problem, search_backend
from connectors.workspace import Workspace
from gateway.config import ComputerUseConfig, Config, WebConfig, secret
from gateway.services.accounts import account_services, calendar_client, email_client
from gateway.services.availability import Availability, availability, browser_problem, tts_problem
from gateway.services.subagents import Enqueue, SubagentService, TurnRunner
from store.artifacts import Artifacts
from store.db import Store
from toolsets.memory import MemoryLimits

# A connector is imported by the function that builds it from its section, so a process imports only
# the clients its config enables (`anyy doctor`, which loads no toolset, imports none by default).
if TYPE_CHECKING:
    from connectors.desktop import Desktop
    from gateway.automations.scheduler import MayRun, RunPrompt
    from toolsets.computer_use import ComputerUse
    from toolsets.jobs import Terminal

log = logging.getLogger(__name__)


class Reporting(Protocol):
    """A surface as far as its status goes."""

    name: str

    def status(self) -> str: ...


class SurfaceStatus(Mapping[str, str]):
    """Live status of each configured surface: "up", "down: <why>", or the surface's own word.
    `started` is the gateway's record of each start (surface name -> "up" | "down: <why>")."""

    def __init__(self, started: Mapping[str, str], surfaces: Sequence[Reporting]) -> None:
        self.started = started
        self.surfaces = surfaces

    def __getitem__(self, name: str) -> str:
        started = self.started.get(name)
        if started is None:
            raise KeyError(name)
        surface = next(s for s in self.surfaces if s.name == name)
        return surface.status() if started == "up" else started

    def __iter__(self) -> Iterator[str]:
        return iter(self.started)

    def __len__(self) -> int:
        return len(self.started)


def web_services(cfg: WebConfig) -> dict[str, Any]:
    """The fetcher ("web", always: the public web needs no configuration) and the search backend
    ("web_search", only when one is configured; without it the web_search tool is absent)."""
    guard = Guard(HostRules(cfg.allowed_hosts, cfg.denied_hosts), allow_private=cfg.allow_private_urls)
    out: dict[str, Any] = {"web": WebFetcher(guard, max_bytes=cfg.max_bytes, timeout_s=cfg.timeout_s)}
    backend = search_backend(cfg.search, searxng_url=cfg.searxng_url,
                             api_key=secret(cfg.key_env) if cfg.key_env else None, key_env=cfg.key_env,
                             timeout_s=cfg.timeout_s)
    if backend is not None:
        out["web_search"] = backend
    return out


def browser_services(config: Config, avail: Availability) -> dict[str, Any]:
    """The browser ("browser", with its "browser_policy") when available (enabled and a Chromium found).
    Building it starts nothing: the browser process starts on first use."""
    if "browser" not in avail:
        return {}
    from connectors.browser import Browser, BrowserSettings, find_executable
    from toolsets.browser import BrowserPolicy
    cfg = config.browser
    executable = find_executable(cfg.executable)
    if executable is None:  # removed from PATH since `availability` looked
        return {}
    guard = Guard(HostRules(cfg.allowed_hosts, cfg.denied_hosts), allow_private=cfg.allow_private_urls)
    settings = BrowserSettings(executable=executable, profiles=config.data_dir / "browser", headless=cfg.headless,
                               timeout_s=cfg.timeout_s, idle_s=cfg.idle_minutes * 60)
    return {"browser": Browser(guard, settings), "browser_policy": BrowserPolicy(tuple(cfg.trusted_hosts))}


def image_services(config: Config, avail: Availability, fetcher: WebFetcher) -> dict[str, Any]:
    """The image generator ("images") when [images] url is set; a provider's image URL on another host
    is fetched through `fetcher`, the web toolset's guarded fetcher."""
    cfg = config.images
    if "images" not in avail:
        return {}
    from connectors.imagegen import ImageGenerator
    return {"images": ImageGenerator(cfg.url, cfg.model, secret(cfg.api_key_env), size=cfg.size, fetcher=fetcher,
                                     timeout_s=cfg.timeout_s, max_bytes=int(cfg.max_mb * 1024 * 1024))}


def connectors(config: Config) -> dict[str, Any]:
    """The configured password connectors by service name. Building one opens no connection."""
    out: dict[str, Any] = {}
    if config.email is not None:
        out["email"] = email_client(config.email)
    if config.calendar is not None:
        out["calendar"] = calendar_client(config.calendar)
    return out


def workspace(config: Config) -> Workspace:
    ws = Workspace(config.workspace_root, [Path(p) for p in config.workspace.write_roots])
    ws.private = private_paths(config, ws)
    return ws


def terminal(config: Config, store: Store) -> Terminal:
    """The terminal service: commands run in the workspace with every configured secret scrubbed from
    their environment; under bwrap they cannot see the data directory (the store holds every chat)."""
    from connectors.processes import Settings
    from connectors.shellrules import Rule
    from toolsets.jobs import Terminal
    ws = workspace(config)
    cfg = config.terminal
    data = config.store_path.parent
    settings = Settings(workspace=ws.root.resolve(), writable=tuple(ws.roots()), hidden=(data, config.data_dir),
                        secret_names=frozenset(config.secret_env_names()), sandbox=cfg.sandbox == "bwrap",
                        network=cfg.network)
    return Terminal(store=store, settings=settings, logs_dir=data / "processes", timeout_s=cfg.timeout_s,
                    rules=tuple(Rule(r.program, r.subcommand) for r in cfg.allowlist), home=str(Path.home()),
                    private=private_paths(config, ws))


def private_paths(config: Config, ws: Workspace) -> PrivatePaths:
    """Anyy's own files (the data directory, the store, the config file) that no read without approval
    may touch; the workspace and the write roots stay readable wherever they are."""
    own = [config.store_path.parent, config.data_dir, *([Path(config.source)] if Path(config.source).is_file() else [])]
    return PrivatePaths(own, ws.roots())


@dataclass(frozen=True)
class VisionLimits:
    """Present as the "vision" service when the model sees images: how far to downscale them."""

    max_side: int
    max_bytes: int
    max_pixels: int  # an image with more is never decoded


def skill_library(config: Config) -> SkillLibrary:
    """The managed skills root in the data directory, then `[skills] roots` (read-only)."""
    return SkillLibrary(config.data_dir / "skills", [Path(r).expanduser() for r in config.skills.roots])


async def skills_check(config: Config) -> list[tuple[str, str, str]]:
    """`anyy doctor`'s skills lines: how many load, and each SKILL.md that does not, by path."""
    library = skill_library(config)
    skills = await asyncio.to_thread(library.skills)
    lines = [("✗", "skills", problem) for problem in library.problems]
    if skills or not lines:
        lines.insert(0, ("✓", "skills", f"{len(skills)} skill(s): {', '.join(sorted(skills)) or 'none yet'}"))
    return lines


def speech_engine(config: Config) -> SpeechEngine | None:
    """The configured text-to-speech engine, or None (then the tts toolset is absent)."""
    cfg = config.tts
    if tts_problem(config) is not None:
        return None
    if cfg.engine == "espeak-ng":
        return EspeakEngine(cfg.voice, cfg.timeout_s)
    return OpenAISpeechEngine(cfg.url, cfg.model, cfg.voice, secret(config.speech.api_key_env), cfg.timeout_s)


def media_services(config: Config, store: Store) -> dict[str, Any]:
    """Artifacts (always), the transcriber and the speech engine (when configured)."""
    cfg = config.artifacts
    out: dict[str, Any] = {"artifacts": Artifacts(store, config.store_path.parent / "artifacts",
                                                  max_file_bytes=int(cfg.max_file_mb * 1024 * 1024),
                                                  max_daily_bytes=int(cfg.max_daily_mb * 1024 * 1024))}
    speech = config.speech
    if speech.transcribe_url:
        out["speech"] = Transcriber(speech.transcribe_url, speech.transcribe_model, secret(speech.api_key_env),
                                    speech.timeout_s)
    engine = speech_engine(config)
    if engine is not None:
        out["tts"] = engine
    if config.model.vision:
        out["vision"] = VisionLimits(max_side=config.model.image_max_side, max_bytes=config.model.image_max_kb * 1024,
                                     max_pixels=config.artifacts.max_image_pixels)
    return out


@dataclass(frozen=True)
class GatewayPorts:
    """What the services need of the gateway, and nothing more: where replies go, how a prompt
    automation and a helper run their turns, who may still be served, and the surfaces' status."""

    enqueue: Enqueue
    run_prompt: RunPrompt
    may_run: MayRun
    turns: Callable[[], TurnRunner]
    surfaces: SurfaceStatus
    resident: bool  # only the resident process may declare another's processes lost


async def build_services(config: Config, store: Store, ports: GatewayPorts) -> dict[str, Any]:
    """Every service by the name tools ask for; connectors only when configured."""
    from gateway.automations.scheduler import AutomationService  # APScheduler: not for `anyy doctor`
    from gateway.services.budget import Budget
    from gateway.services.webhooks import RateLimit, WebhookService

    avail = availability(config)
    for name in sorted(avail.broken):
        log.warning("service_unavailable service=%s reason=%s", name, avail.missing[name])
    services: dict[str, Any] = {"surfaces": ports.surfaces, **account_services(config, store),
                                **web_services(config.web),
                                **media_services(config, store), **browser_services(config, avail),
                                "memory": MemoryLimits(max_chars=config.runtime.memory_max_chars),
                                "workspace": workspace(config)}
    services |= image_services(config, avail, services["web"])
    services["automations"] = AutomationService(store, config.tz, ports.enqueue, ports.run_prompt,
                                                may_run=ports.may_run)
    services["webhooks"] = WebhookService(store, config.data_dir, services["automations"].fire_event,
                                          RateLimit(config.dashboard.webhook_per_minute))
    services["budget"] = Budget(store, config, ports.enqueue)
    services["skills"] = skill_library(config)
    services["subagents"] = SubagentService(store, config.subagents, ports.enqueue, ports.turns)
    if "terminal" in avail:
        term = terminal(config, store)
        if ports.resident:
            await term.recover()
        services["terminal"] = term
    if "computer_use" in avail:  # an `anyy chat` beside `anyy run` uses the resident's display
        screen = await computer_use(config.computer_use, start_xvfb=ports.resident)
        if screen is not None:
            services["computer_use"] = screen
    return services


def desktop(cfg: ComputerUseConfig) -> Desktop:
    from connectors.desktop import Desktop, DesktopSettings
    return Desktop(DesktopSettings(display=cfg.display, xvfb=cfg.xvfb, width=cfg.width, height=cfg.height))


async def computer_use(cfg: ComputerUseConfig, start_xvfb: bool) -> ComputerUse | None:
    """The computer_use service, its display up (Xvfb started when configured); None when the display
    cannot be had (logged; the toolset is then absent and `anyy doctor` says why)."""
    from connectors.desktop import DesktopError
    from toolsets.computer_use import ComputerUse
    driver = desktop(cfg)
    try:
        width, height = await driver.start(start_xvfb=start_xvfb)
    except DesktopError as exc:
        log.warning("computer_use_unavailable display=%s error=%s", cfg.display, exc)
        return None
    log.info("computer_use_ready display=%s size=%dx%d own_display=%s", cfg.display, width, height,
             driver.owns_display)
    return ComputerUse(driver, cfg.stale_after_s)


async def computer_use_check(cfg: ComputerUseConfig) -> list[tuple[str, str, str]]:
    """`anyy doctor`'s computer-use line: the programs it needs, and a screenshot of the display (from a
    short-lived Xvfb when Anyy starts its own)."""
    if not cfg.enabled:
        return []
    from connectors.desktop import DesktopError
    driver = desktop(cfg)
    try:
        try:
            width, height = await driver.start(start_xvfb=False)
            running = True
        except DesktopError:
            if not cfg.xvfb:
                raise
            width, height = await driver.start()
            running = False
        shot = await driver.screenshot(width, height)
    except DesktopError as exc:
        return [("✗", "computer_use", f"{exc}" + ("" if cfg.xvfb else " ([computer_use] xvfb = false: start "
                                                  "that display first, or set xvfb = true)"))]
    finally:
        await driver.aclose()
    detail = f"display {cfg.display} {width}x{height}, input with xdotool, screenshots work ({len(shot.png)} bytes)"
    if cfg.xvfb and running:
        return [("!", "computer_use", f"{detail}; but it is already running, so Anyy cannot start its own Xvfb "
                                      "there (fine if it is a running `anyy run`'s; else choose another display)")]
    return [("✓", "computer_use", detail + (f"; Xvfb starts at {cfg.width}x{cfg.height}" if cfg.xvfb else ""))]


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
                    lines.append(("✓", "email", f"{st.account}: {st.messages} messages, {st.unseen} unseen; "
                                                f"SMTP {st.smtp}"))
            else:
                from connectors.calendar import CalendarNotFound
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
    lines.append(await web_check(config.web))
    if config.browser.enabled:
        lines.append(browser_check(config))
    lines += await skills_check(config)
    return lines


def browser_check(config: Config) -> tuple[str, str, str]:
    """`anyy doctor`'s browser line: which Chromium will be driven (nothing is started)."""
    if (problem := browser_problem(config)) is not None:
        return ("✗", "browser", problem)
    from connectors.browser import find_executable
    found = find_executable(config.browser.executable)
    reach = "private network allowed" if config.browser.allow_private_urls else "public web only"
    return ("✓", "browser", f"{found}; {reach}; actions held for approval"
            + (f" except on {len(config.browser.trusted_hosts)} trusted host pattern(s)"
               if config.browser.trusted_hosts else ""))


async def web_check(cfg: WebConfig) -> tuple[str, str, str]:
    """`anyy doctor`'s web line: what fetches may reach, and whether the search backend answers."""
    reach = "private network allowed" if cfg.allow_private_urls else "public web only"
    if cfg.allowed_hosts:
        reach += f", only {len(cfg.allowed_hosts)} allowed host pattern(s)"
    # web_fetch's extractor is imported on the first page; a broken install should show here, not then.
    if problem := await asyncio.to_thread(extractor_problem):
        return ("✗", "web", f"web_fetch cannot read HTML pages: {problem}")
    services = web_services(cfg)
    try:
        backend = services.get("web_search")
        if backend is None:
            return ("✓", "web", f"fetch: {reach}; search: none configured ([web] search)")
        try:
            results = await backend.search("anyy doctor", 1)
        except SearchError as exc:
            return ("✗", "web", f"fetch: {reach}; search ({cfg.search}): {exc}")
        return ("✓", "web", f"fetch: {reach}; search ({cfg.search}): answering ({len(results)} result(s))")
    finally:
        for service in services.values():
            await service.aclose()
