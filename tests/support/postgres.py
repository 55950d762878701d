"""A private PostgreSQL cluster in a temporary directory: Debian's binaries, 127.0.0.1 on a free port.

`PgCluster.start()` runs initdb and the server as an unprivileged user (as root, `nobody`: PostgreSQL
refuses to run as root), with `trust` for the superuser `anyy` and a password (SCRAM) for the role
`pwuser`, so both kinds of `[store] url` are exercised. `database()` copies a template that has the
schema already (FILE_COPY: a third of the default WAL_LOG copy here), so a fresh database per test
costs about 0.3 s, not the migrations.
Also used by bench/ (`python bench/scale.py` starts one).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from itertools import count
from pathlib import Path
from typing import Any

SUPERUSER = "anyy"
PW_USER, PW_PASSWORD = "pwuser", "s3cret-pw"
TEMPLATE = "anyy_template"


def pg_bin() -> Path | None:
    """The directory of the newest installed PostgreSQL server binaries, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="anyy-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._names = count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:  # the server refuses root; the files must be the runner's
            self._as = ["runuser", "-u", "nobody", "--"]
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, "nobody")

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, cwd="/")

    def url(self, db: str, user: str = SUPERUSER, password: str | None = None) -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def start(self) -> PgCluster:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                  "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
        hba = self.data / "pg_hba.conf"
        hba_text = (f"host all {PW_USER} 127.0.0.1/32 scram-sha-256\n"
                    "local all all trust\nhost all all 127.0.0.1/32 trust\n")
        hba.write_text(hba_text)  # written by this process, so as root given back to the server's user
        if self._as:
            shutil.chown(hba, "nobody")
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root}"
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-o", opts,
                  "-w", "-t", "60", "start")
        self._sql("postgres", f"CREATE ROLE {PW_USER} LOGIN PASSWORD '{PW_PASSWORD}'")
        self._sql("postgres", f"CREATE DATABASE {TEMPLATE}")
        self._migrate_template()
        return self

    def _sql(self, db: str, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def _migrate_template(self) -> None:
        import psycopg

        from store import pg_schema
        from store.pg import PgDatabase

        with psycopg.connect(self.url(TEMPLATE), autocommit=True) as conn:
            pg_schema.migrate(PgDatabase(conn))

    def database(self, owner: str = SUPERUSER) -> str:
        """A new database holding the migrated schema; returns its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self._sql("postgres", f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} OWNER {owner} STRATEGY FILE_COPY")
        return name

    def empty_database(self, owner: str = SUPERUSER) -> str:
        """A new database without the schema (what an operator creates before the first start)."""
        name = f"e{os.getpid()}_{next(self._names)}"
        self._sql("postgres", f"CREATE DATABASE {name} OWNER {owner}")
        return name

    def drop(self, name: str) -> None:
        self._sql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        deadline = time.monotonic() + 30
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            while self.data.exists() and time.monotonic() < deadline:
                shutil.rmtree(self.root, ignore_errors=True)


class Backend:
    """Where a test's store lives: `url` is None for SQLite, else a fresh PostgreSQL database's URL."""

    def __init__(self, name: str, url: str | None = None, cluster: PgCluster | None = None) -> None:
        self.name = name
        self.url = url
        self.cluster = cluster

    def store_section(self, path: str) -> dict[str, Any]:
        """The `[store]` table of a config on this backend."""
        return {"path": path, **({"url": self.url} if self.url else {})}
