"""Is this toolset here? The one answer the runtime, `/tools`, `anyy tools`, `anyy doctor` and the dashboard
give, so they can never disagree.

A toolset or a tool names the service it requires (`Toolset.requires`, `Tool.requires`) and exists only
where that service does (`Toolset.present`). `build_services` builds every service this module does not
call missing, and only those; so what `anyy tools` says without starting anything is what a running
resident offers. The one difference a config cannot predict is a service that fails as it starts (an X
display that will not come up): the resident logs it, `anyy doctor` tries it for real, and `why_absent`
says so.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config import Config

# Printed where a service is absent for no reason the config shows (it failed as the resident started).
DID_NOT_START = "configured, but it did not start (the log and `anyy doctor` say why)"


@dataclass(frozen=True)
class Availability:
    """The services a config gives: every service but those in `missing`, each mapped to what the owner
    would add or install to have it. Usable wherever a container of service names is (`name in it`)."""

    missing: Mapping[str, str]
    broken: frozenset[str] = frozenset()  # configured, but cannot work here (a program missing, a key unset)

    def __contains__(self, name: object) -> bool:
        return name not in self.missing

    def why_absent(self, requires: str | None, running: Container[str] | None = None) -> str:
        """Why the service `requires` is not there ("" when it is): the config's reason, else, when the
        `running` services (a started resident's) lack it, that it failed to start."""
        if requires is None:
            return ""
        if requires in self.missing:
            return self.missing[requires]
        if running is not None and requires not in running:
            return DID_NOT_START
        return ""


def availability(config: Config) -> Availability:
    """Which optional services `config` leaves out, and why. Cheap: reads the config and looks programs up
    on PATH; starts, connects and imports nothing heavy."""
    missing: dict[str, str] = {}
    broken: set[str] = set()

    def lack(name: str, why: str | None, configured: bool) -> None:
        if why is not None:
            missing[name] = why
            if configured:
                broken.add(name)

    served = {service for account in config.accounts.values() for service in account.services}
    lack("email", None if config.email is not None or "email" in served else
         "connector not configured: add a [email] section or an [accounts.NAME] account to the config "
         "(docs/email.md, docs/accounts.md)", False)
    lack("calendar", None if config.calendar is not None or "calendar" in served else
         "connector not configured: add a [calendar] section or an [accounts.NAME] account to the config "
         "(docs/calendar.md, docs/accounts.md)", False)
    lack("web_search", None if config.web.search != "none" else
         "no web search backend is configured (set [web] search; docs/web.md)", False)
    lack("terminal", None if config.terminal.enabled else
         "[terminal] enabled = false in the config (docs/host-tools.md)", False)
    lack("browser", browser_problem(config), config.browser.enabled)
    lack("images", None if config.images.url else
         "no image generator is configured (set [images] url; docs/images.md)", False)
    lack("tts", tts_problem(config), config.tts.engine != "none")
    lack("computer_use", computer_use_problem(config), config.computer_use.enabled)
    return Availability(missing, frozenset(broken))


def browser_problem(config: Config) -> str | None:
    """Why the browser service is absent (not enabled, or no Chromium to drive), or None."""
    cfg = config.browser
    if not cfg.enabled:
        return "not enabled (set [browser] enabled = true; docs/browser.md)"
    from connectors.browser import find_executable  # Playwright itself is imported only on first use
    if find_executable(cfg.executable) is None:
        wanted = cfg.executable or "chromium, chromium-browser or google-chrome on PATH"
        return f"no browser found ({wanted}): apt-get install chromium, or set [browser] executable"
    return None


def tts_problem(config: Config) -> str | None:
    """Why there is no text-to-speech engine, or None."""
    cfg = config.tts
    if cfg.engine == "espeak-ng":
        from connectors.speech import EspeakEngine
        if missing := EspeakEngine.missing_programs():
            return f"engine espeak-ng needs {' and '.join(missing)}: apt-get install espeak-ng ffmpeg"
        return None
    if cfg.engine == "openai":
        return None if cfg.url else "engine openai needs [tts] url (e.g. \"https://api.openai.com/v1\")"
    return "no speech engine is configured (set [tts] engine; docs/media.md)"


def computer_use_problem(config: Config) -> str | None:
    """Why computer use is absent before anything starts (not enabled, programs missing), or None."""
    cfg = config.computer_use
    if not cfg.enabled:
        return "not enabled (set [computer_use] enabled = true; docs/computer-use.md)"
    from connectors.desktop import missing_programs
    if missing := missing_programs(cfg.xvfb):
        return f"needs {' and '.join(missing)} on PATH (apt-get install xdotool xvfb)"
    return None
