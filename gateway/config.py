"""Configuration: one TOML file validated by pydantic. Secrets are named by environment variable.

Lookup: `--config PATH`, else `$ANYY_CONFIG`, else `~/.config/anyy/config.toml` (a missing default file
means "all defaults"). The data directory is `$ANYY_HOME`, else `~/.local/share/anyy`.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from connectors.mcp_names import NameCollision, check_servers
from connectors.web.hosts import normalise_pattern


class ConfigError(Exception):
    """A config problem, phrased for a person: which file, which key, what is wrong."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(Section):
    provider: Literal["openai", "anthropic"] = "openai"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    model: str = ""
    timeout_s: float = Field(60, gt=0)
    max_retries: int = Field(4, ge=0, le=10)
    fallback_model: str = ""
    max_tokens: int = Field(2048, gt=0)
    vision: bool = False  # the model accepts images: photos go to it as image parts
    image_max_side: int = Field(1568, ge=64, le=8192, description="pixels; larger images are downscaled")
    image_max_kb: int = Field(1024, ge=16, le=20_480, description="encoded size of one image sent")

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


class StoreConfig(Section):
    path: str = ""


class RuntimeConfig(Section):
    timezone: str = "UTC"
    max_tool_rounds: int = Field(12, ge=1, le=100)
    context_budget: int = Field(48_000, ge=2_000, description="characters of history sent to the model")
    memory_max_chars: int = Field(4_000, ge=200)
    instructions: str = ""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (use an IANA name such as 'Europe/Berlin')") from None
        return v


class ToolOverride(Section):
    execution: Literal["direct", "audit", "confirm", "change_plan", "force_change_plan"] | None = None
    approval: Literal["none", "hook", "always"] | None = None


class GovernanceConfig(Section):
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)


class ApprovalsConfig(Section):
    default_ttl_hours: float = Field(24, gt=0)
    ttl_hours: dict[str, float] = Field(default_factory=dict)
    approvers: list[str] = Field(default_factory=list, description="user keys, e.g. 'telegram:12345'")
    hook: str = ""


GUEST_TOOLSETS = ["sessions", "memory", "tasks", "automation", "messaging", "clarify", "web"]


class AccessConfig(Section):
    # Toolsets a guest's turn may use (a guest is a user admitted by pairing). Names of toolsets this
    # runtime does not have are harmless, so the default can already list ones still to come.
    guest_toolsets: list[str] = Field(default_factory=lambda: list(GUEST_TOOLSETS))


class TelegramConfig(Section):
    token_env: str = "TELEGRAM_BOT_TOKEN"
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    listen: str = "127.0.0.1"
    port: int = 8443
    secret_token_env: str = "TELEGRAM_WEBHOOK_SECRET"
    allowed_users: list[int] = Field(default_factory=list)
    approvers: list[int] = Field(default_factory=list)
    poll_timeout_s: int = Field(30, ge=0)


class SlackConfig(Section):
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = "SLACK_APP_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    mode: Literal["socket", "http"] = "socket"
    base_url: str = "https://slack.com/api/"
    listen: str = "127.0.0.1"
    port: int = 3000
    allowed_users: list[str] = Field(default_factory=list)
    approvers: list[str] = Field(default_factory=list)
    socket_stale_s: float = Field(90, gt=0)


class EmailConfig(Section):
    imap_host: str
    imap_port: int = 993
    imap_security: Literal["ssl", "starttls", "none"] = "ssl"
    smtp_host: str
    smtp_port: int = 465
    smtp_security: Literal["ssl", "starttls", "none"] = "ssl"
    username: str
    password_env: str = "ANYY_EMAIL_PASSWORD"
    smtp_username: str | None = None  # None: the IMAP username; "": no SMTP AUTH (a local relay)
    smtp_password_env: str = ""  # "": the IMAP password (password_env)
    from_address: str
    from_name: str = ""
    sent_folder: str = ""
    timeout_s: float = Field(30, gt=0)


class CalendarConfig(Section):
    url: str
    username: str = ""
    password_env: str = "ANYY_CALENDAR_PASSWORD"
    default_calendar: str = ""
    timeout_s: float = Field(30, gt=0)


class SkillsConfig(Section):
    roots: list[str] = Field(default_factory=list, description="read-only skill folders besides the managed root")


class SubagentsConfig(Section):
    max_depth: int = Field(2, ge=1, le=5)
    max_concurrent: int = Field(3, ge=1, le=20, description="running helpers per user")
    max_rounds: int = Field(8, ge=1, le=50)


class WebConfig(Section):
    """The web toolset. Without a [web] section: fetch and extract of public pages, no search."""

    search: Literal["searxng", "brave", "tavily", "none"] = "none"
    searxng_url: str = "http://127.0.0.1:8888"
    api_key_env: str = Field("", description="for brave / tavily; default BRAVE_API_KEY / TAVILY_API_KEY")
    allow_private_urls: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    denied_hosts: list[str] = Field(default_factory=list)
    max_bytes: int = Field(5_000_000, ge=10_000, le=100_000_000)
    timeout_s: float = Field(20, gt=0, le=300)

    @field_validator("allowed_hosts", "denied_hosts")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        out = []
        for pattern in v:
            try:
                out.append(normalise_pattern(pattern))
            except ValueError as exc:
                raise ValueError(f"{exc} (use 'example.com' or '*.example.com')") from None
        return out

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
    timeout_s: float = Field(30, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
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
    timeout_s: float = Field(120, gt=0)


class TtsConfig(Section):
    """Voice notes out: the engine behind `text_to_speech` ("none" = the toolset is absent)."""

    engine: Literal["espeak-ng", "openai", "none"] = "none"
    url: str = ""  # for "openai": POST {url}/audio/speech (the key is [speech] api_key_env)
    model: str = "tts-1"  # for "openai"
    voice: str = "en"
    timeout_s: float = Field(120, gt=0)


class ArtifactsConfig(Section):
    """Received attachments and produced files, kept under the data directory."""

    retention_days: float = Field(30, gt=0)
    max_file_mb: float = Field(20, gt=0)
    max_daily_mb: float = Field(200, gt=0, description="per user per day, received and produced together")


class ConsoleConfig(Section):
    user_id: str = "owner"


class WorkspaceConfig(Section):
    root: str = Field("", description="default: <data dir>/workspace, created on first use")
    write_roots: list[str] = Field(default_factory=list, description="more directories writes may go to")


class AllowRule(Section):
    """An operator-added allowlist rule: `program` (and `subcommand`, when given) run without approval
    as long as the rest of the command passes the metacharacter check."""

    program: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._+-]+$")
    subcommand: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9._:+-]+$")


class TerminalConfig(Section):
    enabled: bool = True
    sandbox: Literal["none", "bwrap"] = "none"
    network: bool = True
    timeout_s: float = Field(120, gt=0, le=3600)
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


class Config(Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    tool_governance: GovernanceConfig = Field(default_factory=GovernanceConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    access: AccessConfig = Field(default_factory=AccessConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    speech: SpeechConfig = Field(default_factory=SpeechConfig)
    tts: TtsConfig = Field(default_factory=TtsConfig)
    artifacts: ArtifactsConfig = Field(default_factory=ArtifactsConfig)
    telegram: TelegramConfig | None = None
    slack: SlackConfig | None = None
    email: EmailConfig | None = None
    calendar: CalendarConfig | None = None
    web: WebConfig = Field(default_factory=WebConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)

    source: str = Field("(defaults)", exclude=True)
    data_dir: Path = Field(default_factory=lambda: data_dir(), exclude=True)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.runtime.timezone)

    @property
    def store_path(self) -> Path:
        return Path(self.store.path).expanduser() if self.store.path else self.data_dir / "anyy.db"

    @property
    def workspace_root(self) -> Path:
        return Path(self.workspace.root).expanduser() if self.workspace.root else self.data_dir / "workspace"

    def secret_env_names(self) -> set[str]:
        """Every environment variable a `*_env` key names, in any section, and every `${VAR}` of an MCP
        server: the secrets Anyy was given."""
        names: set[str] = set()

        def walk(model: BaseModel) -> None:
            for key, value in model:
                if isinstance(value, BaseModel):
                    walk(value)
                elif key.endswith("_env") and isinstance(value, str) and value:
                    names.add(value)

        walk(self)
        return names | self.mcp.env_references()


def data_dir() -> Path:
    return Path(os.environ.get("ANYY_HOME") or Path.home() / ".local/share/anyy").expanduser()


def config_path(explicit: str | None) -> tuple[Path, bool]:
    """The file to read, and whether it was asked for (an asked-for file must exist)."""
    if explicit:
        return Path(explicit).expanduser(), True
    if os.environ.get("ANYY_CONFIG"):
        return Path(os.environ["ANYY_CONFIG"]).expanduser(), True
    return Path.home() / ".config/anyy/config.toml", False


def load_config(explicit: str | None = None) -> Config:
    """Read and validate the config; raises ConfigError with one readable message."""
    path, required = config_path(explicit)
    if not path.exists():
        if required:
            raise ConfigError(f"config file {path} does not exist (copy config.example.toml to start)")
        cfg = Config()
        cfg.source = f"{path} (not created yet: copy config.example.toml there)"
        return cfg
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_config(raw, str(path))


def parse_config(raw: dict[str, Any], source: str = "(inline)") -> Config:
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            msg = "unknown key (check the spelling against config.example.toml)" if err["type"] == "extra_forbidden" \
                else err["msg"].removeprefix("Value error, ")
            problems.append(f"  [{key}] {msg}")
        raise ConfigError(f"{source}: invalid configuration:\n" + "\n".join(problems)) from None
    cfg.source = source
    return cfg


def secret(env_name: str) -> str | None:
    """The value of the environment variable a config key names, or None when unset or empty."""
    value = os.environ.get(env_name, "").strip()
    return value or None
