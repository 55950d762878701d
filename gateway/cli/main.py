"""The `anyy` command: the resident process, the console chat, and the admin commands."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.cli import accounts, admin, setup
from gateway.logs import setup_logging

# What a command needs is imported when it runs: `anyy --help` loads no gateway, and a command loads
# only the gateway pieces its config asks for (tests/test_startup_imports.py holds the line).
if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.config import Config
    from gateway.dashboard import Dashboard

log = logging.getLogger(__name__)
CHAT_LOG = "logs/chat.log"  # under the data directory: the terminal chat's log lines
CHAT_HISTORY = "chat_history"  # the terminal chat's prompt history
# A graceful stop takes at most this many times `[runtime] stop_grace_s`, plus two seconds: running
# turns get the grace, the outbox half of it, and closing the rest what is left (9.5 s by default).
STOP_DEADLINE = 1.5


async def run(config: Config, args: argparse.Namespace) -> int:
    """The resident process: every configured surface and the scheduler, until SIGTERM/SIGINT."""
    from connectors.private_paths import protect_this_process
    from gateway.app import Gateway
    from gateway.lock import ResidentLock
    from gateway.surfaces import build_surfaces

    lock = ResidentLock(config.store_path, config.data_dir, shared=bool(config.store.url))
    lock.acquire()
    protect_this_process()  # our environment holds the model key: no same-user process may read it
    # Installed before anything is started or printed: a SIGTERM that arrives while surfaces start
    # (or right after a caller sees the first status line) still shuts down cleanly.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_requested, stop, sig)
    try:
        surfaces, problems = build_surfaces(config)
        for problem in problems:
            log.error("surface_not_started %s", problem)
        gw = Gateway(config, surfaces=surfaces)
        await gw.start()
        freeze_start_up()
        for name, state in gw.started.items():
            print(f"{name}: {state}", file=sys.stderr)
        dashboard = await start_dashboard(gw)
        if not surfaces:
            print("No chat surface is configured ([telegram] or [slack]); running the scheduler only. "
                  "Use `anyy chat` to talk in this terminal.", file=sys.stderr)
        await stop.wait()
        log.info("shutdown_requested")
        # Whatever the stop waits on (a surface's server gone, a store busy on a loaded machine), the
        # process is gone by then: a thread's timer, which a blocked event loop cannot hold up.
        deadline = threading.Timer(STOP_DEADLINE * config.runtime.stop_grace_s + 2, _stop_overdue)
        deadline.daemon = True
        deadline.start()
        if dashboard is not None:
            await dashboard.stop()
        await gw.stop()
        deadline.cancel()
        return 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        lock.release()


def _stop_overdue() -> None:
    log.warning("shutdown_overdue")  # what was committed is in the store; the next start runs the rest
    logging.shutdown()
    os._exit(1)


def stop_requested(stop: asyncio.Event, sig: signal.Signals) -> None:
    """The first SIGTERM/SIGINT starts a graceful stop (bounded by `[runtime] stop_grace_s`); a second one
    exits at once. Nothing is lost either way: what was not finished is recorded in the store (WAL: each
    committed transaction survives the process) and runs at the next start."""
    if not stop.is_set():
        stop.set()
        return
    log.warning("shutdown_forced signal=%s", sig.name)
    logging.shutdown()
    os._exit(128 + sig)


async def start_dashboard(gw: Gateway) -> Dashboard | None:
    """Serve the dashboard when enabled; like a surface, one that cannot bind is reported and the rest runs."""
    cfg = gw.config.dashboard
    if not cfg.enabled:
        return None
    from gateway.dashboard import Dashboard, DashboardError  # aiohttp and Jinja2: only when it is served

    dashboard = Dashboard(gw)
    try:
        await dashboard.start()
    except (OSError, DashboardError) as exc:
        log.error("dashboard_failed listen=%s error=%s", cfg.listen, exc)
        print(f"dashboard: down: {exc}", file=sys.stderr)
        return None
    # The bound address, not the configured one: with port 0 it is the only place the port is told.
    print(f"dashboard: up on {cfg.host}:{dashboard.port} (`anyy dashboard url` prints the login link)",
          file=sys.stderr)
    return dashboard


async def chat(config: Config, args: argparse.Namespace) -> int:
    """The console chat. Owns the scheduler and recovery when no resident process holds the store."""
    from connectors.private_paths import protect_this_process
    from gateway.app import Gateway
    from gateway.lock import LockHeld, ResidentLock
    from gateway.surfaces.console import ConsoleSurface

    lock = ResidentLock(config.store_path, config.data_dir, shared=bool(config.store.url))
    try:
        lock.acquire()
        resident = True
    except LockHeld:
        resident = False  # `anyy run` is up: it fires schedules and delivers other surfaces
    protect_this_process()
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if interactive:
        setup_logging(logging.WARNING, file=config.data_dir / CHAT_LOG)
    console = ConsoleSurface(config.console.user_id, history=config.data_dir / CHAT_HISTORY)
    gw = Gateway(config, surfaces=[console], resident=resident)
    try:
        await gw.start()
        freeze_start_up()
        if interactive:
            model = config.model.model or "no model configured"
            print(f"Anyy ({model}). Type a message, /help for commands, Ctrl-D to quit. "
                  f"Logs: {config.data_dir / CHAT_LOG}")
        await console.read_lines(gw.idle)
        await gw.idle()
        await gw.stop()
    finally:
        lock.release()
    return 0


def freeze_start_up() -> None:
    """Keep what start-up made (modules, config, the tool registry: it lives as long as the process) out
    of the garbage collector's full collections (`gc.freeze`). Otherwise the first full collection walks
    all of it (~25 ms), and it falls due in the first turn, before the first reply."""
    import gc

    gc.freeze()


Command = Callable[["Config", argparse.Namespace], Coroutine[Any, Any, int]]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anyy", description="Anyy, a personal assistant that lives in chat.")
    p.add_argument("--version", action="version", version=f"anyy {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="config file (default: $ANYY_CONFIG or ~/.config/anyy/config.toml)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", parents=[common],
                   help="run the resident assistant (all surfaces + scheduler)").set_defaults(fn=run)
    sub.add_parser("chat", parents=[common], help="chat in this terminal").set_defaults(fn=chat)
    admin.add_parsers(sub, common)
    accounts.add_parsers(sub, common)
    setup.add_parsers(sub, common)
    return p


def main(argv: list[str] | None = None) -> int:
    """The `anyy` command. A reader that goes away (`anyy tools | head`) ends it quietly, as it ends `cat`."""
    try:
        return command(argv)
    except BrokenPipeError:
        # The signal module's documented recipe: stdout goes to devnull, so the interpreter's own flush at
        # exit does not fail a second time and print "Exception ignored" to the terminal.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def command(argv: list[str] | None) -> int:
    """Parse `argv`, load the config and run the command it names; a clear message, never a traceback,
    for the errors a person can fix."""
    args = parser().parse_args(argv)
    # After the parser: `--help`, `--version` and a usage error have exited before any of this loads.
    from gateway import redaction
    from gateway.cli.doctor import preflight
    from gateway.config import ConfigError, config_path, load_config
    from gateway.config.secrets_file import SecretsError, load_secrets, secrets_path
    from gateway.dashboard.auth import DashboardError
    from gateway.lock import LockHeld
    from store.db import StoreError

    setup_logging(logging.INFO if args.command == "run" else logging.WARNING)
    secrets: list[str] = []
    try:
        # secrets.env beside the config file: what the environment does not set already (it wins)
        load_secrets(secrets_path(config_path(args.config)[0]))
        if args.command == "setup":  # its config file may not exist yet: the wizard reads it itself
            return asyncio.run(setup.setup(args))
        config = load_config(args.config)
        redaction.install(config)
        secrets = redaction.configured_secrets(config)
        if args.command in ("run", "chat") and (problems := preflight(config)):
            print("anyy: cannot start:\n" + "\n".join(f"  {p}" for p in problems), file=sys.stderr)
            return 2
        fn: Command = args.fn
        return asyncio.run(fn(config, args))
    except (ConfigError, SecretsError) as exc:
        print(f"anyy: {redaction.redact(str(exc))}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"anyy: {redaction.redact(str(exc), secrets)} (see [store] path, or $ANYY_HOME)", file=sys.stderr)
        return 1
    except (LockHeld, admin.AdminError, DashboardError) as exc:
        print(f"anyy: {redaction.redact(str(exc), secrets)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

