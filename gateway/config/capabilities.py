"""Config sections of the capabilities beyond chat: skills, subagents, web, the browser, MCP servers, speech
and TTS, image generation, artifacts, the workspace and terminal, and the dashboard. `gateway.config`
assembles them into `Config` and re-exports every name, so callers import from there.
"""

# No `from __future__ import annotations` here: pydantic would evaluate each field's annotation from
# its string, about a tenth of building these sections at every start.
import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from connectors.mcp_names import NameCollision, check_servers
from connectors.web.hosts import normalise_pattern
from gateway.config.base import Section


class SkillsConfig(Section):
    roots: list[str] = Field(default_factory=list, description="read-only skill folders besides the managed root")


class SubagentsConfig(Section):
    max_depth: int = Field(default=2, ge=1, le=5)
    max_concurrent: int = Field(default=3, ge=1, le=20, description="running helpers per user")
    max_rounds: int = Field(default=8, ge=1, le=50)
    max_tokens: int = Field(default=200_000, ge=1_000, description="tokens (in + out) one helper's model calls may use")


class WebConfig(Section):
    """The web toolset. Without a [web] section: fetch and extract of public pages, no search."""

    search: Literal["searxng", "brave", "tavily", "none"] = "none"
    searxng_url: str = "http://127.0.0.1:8888"
    api_key_env: str = Field(default="", description="for brave / tavily; default BRAVE_API_KEY / TAVILY_API_KEY")
    allow_private_urls: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    denied_hosts: list[str] = Field(default_factory=list)
    max_bytes: int = Field(default=5_000_000, ge=10_000, le=100_000_000)
    timeout_s: float = Field(default=20, gt=0, le=300)

    @field_validator("allowed_hosts", "denied_hosts")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return host_patterns(v)

    @field_validator("searxng_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v

    @property
    def key_env(self) -> str:
        """The environment variable holding the search API key."""
        return self.api_key_env or {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}.get(self.search, "")
def host_patterns(v: list[str]) -> list[str]:
    """Host patterns in canonical form ('example.com', '*.example.com'); ValueError naming a bad one."""
    out = []
    for pattern in v:
        try:
            out.append(normalise_pattern(pattern))
        except ValueError as exc:
            raise ValueError(f"{exc} (use 'example.com' or '*.example.com')") from None
    return out


class BrowserConfig(Section):
    """The browser toolset: Playwright driving a local Chromium (absent unless enabled)."""

    enabled: bool = False
    executable: str = Field(default="", description="default: chromium, chromium-browser or google-chrome on PATH")
    headless: bool = True
    allow_private_urls: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    denied_hosts: list[str] = Field(default_factory=list)
    trusted_hosts: list[str] = Field(default_factory=list, description="pages whose clicks/typing run audited")
    timeout_s: float = Field(default=20, gt=0, le=300)
    idle_minutes: float = Field(default=10, gt=0, description="the browser closes after this long unused")

    @field_validator("allowed_hosts", "denied_hosts", "trusted_hosts")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return host_patterns(v)


class ImagesConfig(Section):
    """Image generation: an OpenAI-compatible images endpoint (the toolset exists only with `url`)."""

    url: str = Field(default="", description="base URL; POST {url}/images/generations")
    model: str = "gpt-image-1"
    api_key_env: str = "ANYY_IMAGES_KEY"
    size: str = Field(default="1024x1024", pattern=r"^\d{2,5}x\d{2,5}$")
    timeout_s: float = Field(default=120, gt=0, le=600)
    max_mb: float = Field(default=20, gt=0, le=100, description="the largest image accepted from the provider")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v.rstrip("/")


ExecutionName = Literal["direct", "audit", "confirm", "change_plan", "force_change_plan"]


class McpServerConfig(Section):
    """One MCP server: `command` (stdio child process) or `url` (streamable HTTP), not both."""

    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    policy: ExecutionName = "confirm"
    keywords: list[str] = Field(default_factory=list)
    enabled: bool = True
    guests: bool = False
    timeout_s: float = Field(default=30, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerConfig":
        if bool(self.command) == bool(self.url):
            raise ValueError("set either command (a stdio server) or url (a streamable HTTP server)")
        if self.url and (self.args or self.env):
            raise ValueError("args and env are for stdio servers (command); an HTTP server takes headers")
        if self.command and self.headers:
            raise ValueError("headers are for HTTP servers (url); a stdio server takes env")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        return self


class McpConfig(Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        try:
            check_servers(v)
        except NameCollision as exc:
            raise ValueError(str(exc)) from None
        return v

    @property
    def enabled(self) -> dict[str, McpServerConfig]:
        return {name: s for name, s in self.servers.items() if s.enabled}

    def env_references(self) -> set[str]:
        """The variables `${VAR}` in any server's `env` or `headers` names: secrets, like `*_env` keys."""
        values = [v for s in self.servers.values() for v in (*s.env.values(), *s.headers.values())]
        return {m for v in values for m in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", v)}


class SpeechConfig(Section):
    """Voice notes in: an OpenAI-compatible transcription endpoint (whisper.cpp server, speaches, OpenAI)."""

    transcribe_url: str = ""  # POST {transcribe_url}/audio/transcriptions; empty = voice notes are not transcribed
    transcribe_model: str = "whisper-1"
    api_key_env: str = "ANYY_SPEECH_KEY"
    timeout_s: float = Field(default=120, gt=0)


class TtsConfig(Section):
    """Voice notes out: the engine behind `text_to_speech` ("none" = the toolset is absent)."""

    engine: Literal["espeak-ng", "openai", "none"] = "none"
    url: str = ""  # for "openai": POST {url}/audio/speech (the key is [speech] api_key_env)
    model: str = "tts-1"  # for "openai"
    voice: str = "en"
    timeout_s: float = Field(default=120, gt=0)


class ArtifactsConfig(Section):
    """Received attachments and produced files, kept under the data directory."""

    retention_days: float = Field(default=30, gt=0)
    max_file_mb: float = Field(default=20, gt=0)
    max_daily_mb: float = Field(default=200, gt=0, description="per user per day, received and produced together")
    max_image_pixels: int = Field(default=40_000_000, ge=1_000_000, le=178_000_000,
                                  description="an image with more pixels is described, never decoded")


class WorkspaceConfig(Section):
    root: str = Field(default="", description="default: <data dir>/workspace, created on first use")
    write_roots: list[str] = Field(default_factory=list, description="more directories writes may go to")


class AllowRule(Section):
    """An operator-added allowlist rule: `program` (and `subcommand`, when given) run without approval
    as long as the rest of the command passes the metacharacter check."""

    program: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._+-]+$")
    subcommand: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9._:+-]+$")


class TerminalConfig(Section):
    enabled: bool = True
    sandbox: Literal["none", "bwrap"] = "none"
    network: bool = True
    timeout_s: float = Field(default=120, gt=0, le=3600)
    allowlist: list[AllowRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _network_needs_sandbox(self) -> "TerminalConfig":
        if not self.network and self.sandbox != "bwrap":
            raise ValueError('network = false needs sandbox = "bwrap": without the sandbox commands always '
                             "reach the network")
        return self


class DashboardConfig(Section):
    enabled: bool = True
    listen: str = "127.0.0.1:8765"
    allow_remote: bool = False
    webhook_per_minute: int = Field(default=30, ge=1, le=100_000,
                                    description="authenticated requests one webhook automation takes a minute")

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        split_listen(v)
        return v

    @model_validator(mode="after")
    def _loopback_unless_allowed(self) -> "DashboardConfig":
        # The dashboard can approve an email: serving it beyond this machine must be a deliberate choice.
        if not self.allow_remote and not is_loopback(self.host):
            raise ValueError(f"listen = {self.listen!r} is not a loopback address; use 127.0.0.1 or set "
                             "allow_remote = true to serve the dashboard beyond this machine")
        return self


def split_listen(listen: str) -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:8765`) -> (host, port); ValueError naming the problem."""
    host, sep, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen = {listen!r} must be HOST:PORT, e.g. '127.0.0.1:8765'")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


class ComputerUseConfig(Section):
    """The computer_use toolset: see and drive one X display (docs/computer-use.md)."""

    enabled: bool = False
    display: str = Field(default=":99", pattern=r"^[A-Za-z0-9.-]*:\d{1,5}(?:\.\d{1,3})?$",
                         description="the X display used, never $DISPLAY")
    xvfb: bool = Field(default=True, description="Anyy starts Xvfb on `display` itself and stops it on exit")
    width: int = Field(default=1280, ge=320, le=7680, description="pixels, of the Xvfb screen")
    height: int = Field(default=800, ge=200, le=4320)
    stale_after_s: float = Field(default=900, gt=0, description="an action approved later than this after its "
                                 "preview is refused: the screen may have changed")
    approve: Literal["each"] = Field(default="each", description='one approval per action; "turn" (one approval for a '
                                     "bounded batch of a turn's actions) is not built yet")
