"""Start-up loads only what is configured: the modules a fresh `anyy` process has imported.

Each check runs a real process (the `anyy` command, or `python -c`) with a default config in a temp
directory and reads `sys.modules` as the process exits, so what a command imports on its way, lazily
included, is counted. A feature that is not configured must leave its libraries unloaded.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from sqlite_utils import Database

from store.db import SCHEMA_VERSION
from store.migrations import MIGRATIONS, migrate
from tests.support.cli import SUBPROCESS_S, model_config

# Libraries that only an optional feature needs (a connector, a surface, the dashboard, MCP, PostgreSQL,
# the browser) or that nothing of a default start-up should bring along (httpx's CLI brings pygments;
# APScheduler's process pool brings multiprocessing).
FORBIDDEN = frozenset({
    "aiohttp", "PIL", "jinja2", "lxml", "trafilatura", "pypdf", "jsonschema", "icalendar", "recurring_ical_events",
    "pygments", "yaml", "mcp", "mcp_types", "telegram", "slack_sdk", "slack_bolt", "psycopg", "playwright",
    "markdown_it", "multiprocessing", "tornado", "cryptography",
})
# httpx's default transport: the model client has its own (connectors/http1.py), so a chat never loads it.
HTTPX_DEFAULT_TRANSPORT = frozenset({"httpcore", "anyio", "h11"})
# `anyy doctor` checks that web_fetch can read an HTML page (web is on in every config), which is
# the import of the extractor's chain; the rest stays unloaded.
DOCTOR_CHECKS_THE_EXTRACTOR = frozenset({"lxml", "trafilatura"})
# What a chat needs only for a store that needs it: sqlite-utils (and click, pluggy, dateutil with it) to
# migrate a SQLite file, APScheduler (and its process pool's multiprocessing) for the first scheduled job.
FOR_THE_STORE = frozenset({"sqlite_utils", "click", "pluggy", "dateutil", "apscheduler", "multiprocessing"})
# What `import gateway.cli.main` may load beyond `import asyncio, sqlite3`: the parser's modules and a
# few standard ones. Building the parser must stay this cheap, since `anyy --help` is all of it.
CLI_MAIN_GATEWAY = {"gateway", "gateway.cli", "gateway.cli.accounts", "gateway.cli.admin", "gateway.cli.doctor",
                    "gateway.cli.main", "gateway.cli.mcp", "gateway.cli.setup", "gateway.logs", "gateway.services",
                    "gateway.services.usage"}
CLI_MAIN_MAX_EXTRA = 40  # modules beyond the bare interpreter's; 23 when this was written

ROOT = Path(__file__).resolve().parent.parent
# Runs `python -m gateway.cli ARGS` and writes every loaded module's name when the process exits.
DUMP = ("import atexit, runpy, sys\n"
        "out = sys.argv.pop(1)\n"
        "atexit.register(lambda: open(out, 'w').write('\\n'.join(n for n, m in sys.modules.items() if m)))\n"
        "runpy.run_module('gateway.cli', run_name='__main__', alter_sys=True)\n")


async def run(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=ROOT, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), SUBPROCESS_S)
    return proc.returncode or 0, out.decode(), err.decode()


async def anyy_modules(tmp_path: Path, env: dict[str, str], *args: str, stdin: str = "") -> tuple[set[str], str]:
    """The modules loaded by `anyy ARGS` by the time it exits, and what it printed."""
    dump = tmp_path / "modules.txt"
    code, out, err = await run([sys.executable, "-c", DUMP, str(dump), *args], env, stdin)
    assert code in (0, 1), err  # doctor exits 1 on a failed check; the imports are what is tested
    return set(dump.read_text().split()), out


async def python_modules(code: str, env: dict[str, str]) -> set[str]:
    status, out, err = await run([sys.executable, "-c", f"{code}\nimport sys\n"
                                  "print('\\n'.join(n for n, m in sys.modules.items() if m))"], env)
    assert status == 0, err
    return set(out.split())


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def libraries(modules: set[str]) -> set[str]:
    """The top-level names that are not the standard library's (nor its private helpers')."""
    return {t for t in tops(modules) if t not in sys.stdlib_module_names and not t.startswith("_")}


async def test_importing_the_cli_loads_the_parser_and_nothing_else(home):
    bare = await python_modules("import asyncio, sqlite3", home)
    loaded = await python_modules("import asyncio, sqlite3\nimport gateway.cli.main", home)
    extra = loaded - bare
    assert {m for m in extra if m.split(".")[0] in ("gateway", "connectors", "toolsets", "store")} == CLI_MAIN_GATEWAY
    assert libraries(extra) == {"gateway"}  # no third-party library at all
    assert len(extra) <= CLI_MAIN_MAX_EXTRA, sorted(extra)


async def test_help_loads_no_library(tmp_path, home):
    modules, out = await anyy_modules(tmp_path, home, "--help")
    assert "doctor" in out and "chat" in out
    assert tops(modules) & FORBIDDEN == set()
    assert libraries(modules) == {"gateway"}


async def test_doctor_loads_only_what_it_checks(tmp_path, home, model):
    cfg = model_config(tmp_path, model)
    modules, out = await anyy_modules(tmp_path, home, "doctor", "--config", cfg)
    assert "model: openai fake-1" in out and "web: fetch" in out
    assert tops(modules) & (FORBIDDEN - DOCTOR_CHECKS_THE_EXTRACTOR) == set()


async def test_chat_to_its_first_reply_loads_no_optional_library(tmp_path, home, model):
    cfg = model_config(tmp_path, model)
    modules, out = await anyy_modules(tmp_path, home, "chat", "--config", cfg, stdin="hello\n")
    assert out.splitlines() == ["echo: hello"]
    assert tops(modules) & FORBIDDEN == set()
    assert tops(modules) & HTTPX_DEFAULT_TRANSPORT == set()
    assert "sqlite_utils" in tops(modules)  # a new store file is migrated
    # Every toolset is registered, its descriptor known, without its connector's library.
    assert {"toolsets.calendar", "toolsets.email", "toolsets.browser", "toolsets.media_generation"} <= modules
    assert {"connectors.mailparse", "connectors.mailcompose", "connectors.browser", "connectors.calendar",
            "connectors.ical"}.isdisjoint(modules)

    # The next chat on that store: migrated already, no automation scheduled.
    modules, out = await anyy_modules(tmp_path, home, "chat", "--config", cfg, stdin="hello again\n")
    assert out.splitlines() == ["echo: hello again"]
    assert tops(modules) & (FORBIDDEN | FOR_THE_STORE | HTTPX_DEFAULT_TRANSPORT) == set()


async def test_a_scheduled_reminder_loads_the_scheduler(tmp_path, home, model):
    """The other side of the check above: with a reminder in the store, the chat holds its job."""
    cfg = model_config(tmp_path, model)
    modules, out = await anyy_modules(tmp_path, home, "chat", "--config", cfg, stdin="/remind in 2 hours stretch\n")
    assert "apscheduler" in tops(modules), out
    modules, out = await anyy_modules(tmp_path, home, "chat", "--config", cfg, stdin="/reminders\n")
    assert "stretch" in out
    assert "apscheduler" in tops(modules) and "sqlite_utils" not in tops(modules)


def test_the_schema_version_counts_the_migrations():
    """A store file at `SCHEMA_VERSION` opens without migrating: it must be the number of migrations."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert len(MIGRATIONS.applied(Database(conn))) == SCHEMA_VERSION


async def test_a_configured_feature_loads_its_library(tmp_path, home, model):
    """The other side: the checks above would pass if nothing were ever imported. A skill in the
    managed root is read at start, so the chat loads yaml for it."""
    skill = Path(home["ANYY_HOME"]) / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Greets people.\n---\n\nSay hello.\n")
    cfg = model_config(tmp_path, model)
    modules, out = await anyy_modules(tmp_path, home, "doctor", "--config", cfg)
    assert "1 skill(s): greet" in out
    assert "yaml" in tops(modules)
