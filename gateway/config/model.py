"""Configuration: one TOML file validated by pydantic. Secrets are named by environment variable.

Lookup: `--config PATH`, else `$ANYY_CONFIG`, else `~/.config/anyy/config.toml` (a missing default file
means "all defaults"). The data directory is `$ANYY_HOME`, else `~/.local/share/anyy`.
"""

# No `from __future__ import annotations` here: pydantic would evaluate each field's annotation from
# its string, about a tenth of building these sections at every start.
import os
import tomllib
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from gateway.config.accounts import AccountConfig, check_account_names
from gateway.config.base import Section
from gateway.config.budget import BudgetConfig
from gateway.config.capabilities import (
    ArtifactsConfig,
    BrowserConfig,
    ComputerUseConfig,
    DashboardConfig,
    ImagesConfig,
    McpConfig,
    McpServerConfig,
    SkillsConfig,
    SpeechConfig,
    SubagentsConfig,
    TerminalConfig,
    TtsConfig,
    WebConfig,
    WorkspaceConfig,
)
from gateway.config.zone import is_zone, system_zone

# Callers import every section from here, wherever it is defined.
__all__ = [
    "AccessConfig", "AccountConfig", "ApprovalsConfig", "ArtifactsConfig", "BrowserConfig", "CalendarConfig",
    "ComputerUseConfig",
    "Config", "ConfigError", "ConsoleConfig", "DashboardConfig", "EmailConfig", "GovernanceConfig", "ImagesConfig",
    "McpConfig",
    "McpServerConfig", "ModelConfig", "RuntimeConfig", "SkillsConfig", "SlackConfig", "SpeechConfig", "StoreConfig",
    "SubagentsConfig", "TelegramConfig", "TelegramLimits", "TerminalConfig", "ToolOverride", "TtsConfig", "WebConfig",
    "WorkspaceConfig",
    "config_path", "data_dir", "load_config", "parse_config", "secret",
]


class ConfigError(Exception):
    """A config problem, phrased for a person: which file, which key, what is wrong."""


class ThinkingConfig(Section):
    """`[model] thinking = { budget_tokens = N }`: Anthropic's extended thinking, N tokens of it."""

    budget_tokens: int = Field(ge=1024, description="at least 1024, as Anthropic requires")


class ModelConfig(Section):
    provider: Literal["openai", "anthropic"] = "openai"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    model: str = ""
    timeout_s: float = Field(default=60, gt=0)  # the wait for the answer, and between pieces of a stream
    stream_max_s: float = Field(default=600, gt=0, description="a whole streamed answer")
    max_retries: int = Field(default=4, ge=0, le=10)
    fallback_model: str = ""
    max_tokens: int = Field(default=2048, gt=0)
    # The reply-length field of the OpenAI wire; "" chooses per model (max_completion_tokens for
    # api.openai.com and gpt-5*/o1*/o3*/o4*, max_tokens elsewhere).
    max_tokens_field: Literal["", "max_tokens", "max_completion_tokens"] = ""
    vision: bool = False  # the model accepts images: photos go to it as image parts
    image_max_side: int = Field(default=1568, ge=64, le=8192, description="pixels; larger images are downscaled")
    image_max_kb: int = Field(default=1024, ge=16, le=20_480, description="encoded size of one image sent")
    # Prices per million tokens, in any currency (for /usage and `anyy usage`); unset means "not priced".
    price_in_per_mtok: float | None = Field(default=None, ge=0)
    price_out_per_mtok: float | None = Field(default=None, ge=0)
    price_cached_per_mtok: float | None = Field(default=None, ge=0)
    # Thinking, for models that can: Anthropic's extended thinking, and the effort of OpenAI-wire
    # reasoning models (OpenAI's o-series and gpt-5, DeepSeek, Gemini, OpenRouter, Ollama).
    thinking: ThinkingConfig | None = None
    reasoning_effort: Literal["", "low", "medium", "high"] = ""

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    @model_validator(mode="after")
    def _thinking_fits_provider(self) -> "ModelConfig":
        if self.thinking is not None:
            if self.provider != "anthropic":
                raise ValueError('thinking = { budget_tokens = N } is Anthropic\'s setting (provider = "anthropic"); '
                                 'for an OpenAI-compatible reasoning model set reasoning_effort = "low", "medium" '
                                 'or "high"')
            if self.thinking.budget_tokens >= self.max_tokens:
                raise ValueError(f"thinking.budget_tokens ({self.thinking.budget_tokens}) must be less than "
                                 f"max_tokens ({self.max_tokens}): the thinking counts against the reply's tokens")
        if self.reasoning_effort and self.provider == "anthropic":
            raise ValueError('reasoning_effort is for OpenAI-compatible reasoning models; with provider = '
                             '"anthropic" turn thinking on with thinking = { budget_tokens = N }')
        return self


class StoreConfig(Section):
    path: str = ""  # the SQLite file (default <data dir>/anyy.db); with `url`, only what sits beside it
    # postgresql://USER[:PASSWORD]@HOST:PORT/DB: a PostgreSQL database several residents share
    # (docs/scale.md). Empty: the SQLite file.
    url: str = ""
    password_env: str = ""  # the variable holding the database password, when the URL has none

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql://USER@HOST:PORT/DB URL (or empty for the SQLite file)")
        return value


class RuntimeConfig(Section):
    timezone: str = ""  # "" = the system's zone (system_zone)
    max_tool_rounds: int = Field(default=12, ge=1, le=100)
    context_budget: int = Field(default=48_000, ge=2_000, description="characters of history sent to the model")
    # Many short messages fit the characters but each costs the provider a few tokens of framing and the
    # gateway a little work: the window is bounded by count too (whole turns, like the characters).
    context_max_messages: int = Field(default=200, ge=10, description="messages of history sent to the model")
    # On SIGTERM: turns in flight get this long to finish, the outbox half as long at most to flush, and
    # `anyy run` exits at 1.5 times it and 2 s whatever is left; queued turns and whatever is left stay
    # recorded for the next start.
    stop_grace_s: float = Field(default=5.0, ge=0, le=60)
    memory_max_chars: int = Field(default=4_000, ge=200)
    instructions: str = ""
    stream: bool = True  # replies appear while the model writes them (where the surface can edit messages)
    welcome: bool = False  # each owner's first message on a surface gets a welcome (`anyy setup` turns it on)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if v and not is_zone(v):
            raise ValueError(f"unknown time zone {v!r} (use an IANA name such as 'Europe/Berlin')") from None
        return v


class ToolOverride(Section):
    execution: Literal["direct", "audit", "confirm", "change_plan", "force_change_plan"] | None = None
    approval: Literal["none", "hook", "always"] | None = None


class GovernanceConfig(Section):
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)


class ApprovalsConfig(Section):
    default_ttl_hours: float = Field(default=24, gt=0)
    ttl_hours: dict[str, float] = Field(default_factory=dict)
    approvers: list[str] = Field(default_factory=list, description="user keys, e.g. 'telegram:12345'")
    hook: str = ""


GUEST_TOOLSETS = ["sessions", "memory", "tasks", "automation", "messaging", "clarify", "web"]


class AccessConfig(Section):
    # Toolsets a guest's turn may use (a guest is a user admitted by pairing). Names of toolsets this
    # runtime does not have are harmless, so the default can already list ones still to come.
    guest_toolsets: list[str] = Field(default_factory=lambda: list(GUEST_TOOLSETS))


class TelegramLimits(Section):
    """Telegram's flood limits, kept by the bot itself (gateway/surfaces/telegram/limits.py) so replies are
    paced instead of refused. Raise them only for a local Bot API server or a benchmark."""

    per_bot_per_s: float = Field(default=30, gt=0, description="requests to chats per second, all chats together")
    per_chat_per_s: float = Field(default=1, gt=0, description="messages per second into one chat")
    per_group_per_min: float = Field(default=20, gt=0, description="messages per minute into one group")
    # 0: a 429 goes back to the outbox, which sends the row again after retry_after (and reports it)
    retries: int = Field(default=0, ge=0, description="a 429 is waited out and the request sent again this often")


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
    poll_timeout_s: int = Field(default=30, ge=0)
    limits: TelegramLimits = Field(default_factory=TelegramLimits)


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
    socket_stale_s: float = Field(default=90, gt=0)
    api_timeout_s: int = Field(default=30, ge=1, le=300, description="a Web API call gives up after this")


class EmailConfig(Section):
    name: str = "default"  # the account's name, as tools and `anyy accounts list` call it
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
    timeout_s: float = Field(default=30, gt=0)
    auth_serv_id: str = Field(default="", description=(
        "the authserv-id your receiving server writes in its Authentication-Results (e.g. mx.example.org); "
        "only its headers count for a trigger's verified_sender, and without it no message is verified"))


class CalendarConfig(Section):
    name: str = "default"  # the account's name, as tools and `anyy accounts list` call it
    url: str
    username: str = ""
    password_env: str = "ANYY_CALENDAR_PASSWORD"
    default_calendar: str = ""
    timeout_s: float = Field(default=30, gt=0)


class ConsoleConfig(Section):
    user_id: str = "owner"


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
    computer_use: ComputerUseConfig = Field(default_factory=ComputerUseConfig)
    telegram: TelegramConfig | None = None
    slack: SlackConfig | None = None
    email: EmailConfig | None = None
    calendar: CalendarConfig | None = None
    accounts: dict[str, AccountConfig] = Field(default_factory=dict)  # OAuth accounts by name (docs/accounts.md)
    web: WebConfig = Field(default_factory=WebConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)

    source: str = Field(default="(defaults)", exclude=True)
    data_dir: Path = Field(default_factory=lambda: data_dir(), exclude=True)

    @model_validator(mode="after")
    def _account_names(self) -> "Config":
        check_account_names(self.accounts, self.email.name if self.email else None,
                            self.calendar.name if self.calendar else None)
        return self

    @property
    def tz(self) -> ZoneInfo:
        """The owner's zone: `[runtime] timezone`, else the system's."""
        return ZoneInfo(self.runtime.timezone or system_zone()[0])

    @property
    def tz_source(self) -> str:
        """Where `tz` comes from, for `anyy doctor`."""
        return "[runtime] timezone" if self.runtime.timezone else f"the system's zone ({system_zone()[1]})"

    @property
    def store_path(self) -> Path:
        return Path(self.store.path).expanduser() if self.store.path else self.data_dir / "anyy.db"

    def new_store(self, owner: str | None = None) -> Any:
        """A `store.db.Store` (unopened) for `[store]`: the SQLite file, or the PostgreSQL `url`."""
        from store.db import Store

        password = secret(self.store.password_env) if self.store.password_env else None
        return Store(self.store_path, url=self.store.url or None, password=password, owner=owner)

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
                elif isinstance(value, dict):  # [accounts.NAME] tables
                    for item in value.values():
                        if isinstance(item, BaseModel):
                            walk(item)
                elif key.endswith("_env") and isinstance(value, str) and value:
                    names.add(value)

        walk(self)
        names.add("ANYY_SECRET_KEY")  # the key sealing the accounts' tokens (gateway/accounts/vault.py)
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
            raise ConfigError(f"config file {path} does not exist (`anyy setup` writes one)")
        cfg = Config()
        cfg.source = f"{path} (not created yet: `anyy setup` writes it)"
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
            problems.append(f"  [{key}] {msg}" if key else f"  {msg}")
        raise ConfigError(f"{source}: invalid configuration:\n" + "\n".join(problems)) from None
    cfg.source = source
    return cfg


def secret(env_name: str) -> str | None:
    """The value of the environment variable a config key names, or None when unset or empty."""
    value = os.environ.get(env_name, "").strip()
    return value or None
