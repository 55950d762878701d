"""The steps about this machine and the owner's accounts: the time zone (detected, confirmed), an OAuth
account (its [accounts.NAME] table, then `anyy accounts add NAME`), and the systemd user unit of
docs/deploy.md with this installation's paths filled in."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config.zone import is_zone, system_zone
from gateway.setup.ask import Ask, SetupError

# docs/deploy.md's unit; tests/test_setup_files.py holds the two together.
UNIT = """\
# ~/.config/systemd/user/anyy.service
[Unit]
Description=Anyy personal assistant
After=network-online.target

[Service]
WorkingDirectory={workdir}
# TELEGRAM_BOT_TOKEN=…, OPENAI_API_KEY=…, one VAR=value a line. (systemd has no comments at the end
# of a line: a "# …" after the path would become part of the path, and the unit would not start.)
EnvironmentFile={secrets}
ExecStart={anyy} run
Restart=on-failure
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=20
# Hardening: no privilege gain through setuid programs, a private /tmp, and the whole file system
# read-only except the data directory (the store, its lock, the workspace, results, the dashboard
# token). Add a ReadWritePaths= line for a [store] path or [workspace] root outside it.
NoNewPrivileges=true
PrivateTmp=true
ProtectSystem=strict
ReadWritePaths={data}
ProtectControlGroups=true
RestrictSUIDSGID=true

[Install]
WantedBy=default.target
"""


async def zone_step(ask: Ask, args: Any, current: str) -> str:
    """The IANA zone reminders and times use: the flag, else the owner's answer, else the one detected."""
    detected, source = system_zone()
    default = current or detected
    if ask.interactive and not args.timezone:
        ask.say(f"Time zone detected: {detected} (from {source}).")
    zone = await ask.text("Your time zone (an IANA name such as Europe/Berlin)", flag="--timezone",
                          given=args.timezone, default=default)
    while not is_zone(zone):
        if not ask.interactive or args.timezone:
            raise SetupError(f"unknown time zone {zone!r} (use an IANA name such as Europe/Berlin)")
        ask.say(f"  {zone!r} is not a time zone name.")
        zone = await ask.text("Your time zone", flag="--timezone", default=default)
    ask.say(f"Time zone: {zone}.")
    return zone


@dataclass
class AccountAnswer:
    name: str
    table: dict[str, Any]
    secrets: dict[str, str]


async def account_step(ask: Ask, args: Any) -> AccountAnswer:
    """The [accounts.NAME] table to write before `anyy accounts add NAME` signs in (docs/accounts.md)."""
    if ask.interactive and not args.account:
        ask.say("An account gives Anyy your mail and calendar (Google or Microsoft). You need an OAuth client "
                "of your own first: docs/accounts.md says how (a few minutes in the provider's console).")
    name = await ask.text("A name for the account (e.g. personal, work)", flag="--account", given=args.account)
    provider = await ask.choose("Which provider?", [("google", "Google"), ("microsoft", "Microsoft")],
                                flag="--account-provider", given=args.account_provider)
    client_id = await ask.text("The OAuth client ID", flag="--account-client-id", given=args.account_client_id)
    table: dict[str, Any] = {"provider": provider, "client_id": client_id}
    secrets: dict[str, str] = {}
    if provider == "google":
        env_name = args.account_client_secret_env or client_secret_env_name(name)
        secrets[env_name] = await ask.secret("The OAuth client secret (GOCSPX-…)", flag="--account-client-secret-env",
                                             env_name=args.account_client_secret_env, current=None)
        table["client_secret_env"] = env_name
    return AccountAnswer(name, table, secrets)


def client_secret_env_name(account: str) -> str:
    """The variable for an account's client secret: ANYY_MY_WORK_CLIENT_SECRET for `my-work` (a name may
    hold '-', a variable may not: secrets.env and a shell would refuse it)."""
    return f"ANYY_{re.sub(r'[^A-Z0-9]', '_', account.upper())}_CLIENT_SECRET"


def unit_text(secrets: Path, data: Path) -> str:
    """The unit for this installation: this `anyy`, this secrets file, this data directory."""
    anyy = shutil.which("anyy") or str(Path(sys.executable).with_name("anyy"))
    return UNIT.format(workdir=data, secrets=secrets, anyy=Path(anyy).resolve(), data=data)


async def service_step(ask: Ask, args: Any, secrets: Path, data: Path) -> str:
    """Write ~/.config/systemd/user/anyy.service and, where systemd runs, enable and start it."""
    unit = Path.home() / ".config/systemd/user/anyy.service"
    data.mkdir(parents=True, exist_ok=True)  # ReadWritePaths= needs it to exist before the first start
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(unit_text(secrets, data), encoding="utf-8")
    ask.say(f"Wrote {unit}.")
    systemctl = shutil.which("systemctl")
    start = args.start if args.start is not None else await ask.confirm("Start it now (and at every login)?",
                                                                        default=True)
    if not start:
        return f"installed {unit}; start it with `systemctl --user enable --now anyy`"
    if systemctl is None:
        return f"installed {unit}; no systemctl here: start it with `systemctl --user enable --now anyy`"
    for argv in ([systemctl, "--user", "daemon-reload"], [systemctl, "--user", "enable", "--now", "anyy"]):
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode:
            return f"installed {unit}, but `{' '.join(argv[1:])}` failed: {out.decode(errors='replace').strip()}"
    return f"installed and started ({unit}); logs: journalctl --user -u anyy -f"
