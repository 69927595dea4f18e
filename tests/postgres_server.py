"""A real PostgreSQL server for the tests of the PostgreSQL ledger (DESIGN.md §11: the same test
suite runs on both stores), started once per test session from the Debian `postgresql`
package's binaries, on a free loopback port, trusting loopback connections; each test gets a
fresh database, copied from a template that already holds the ledger's tables (`fresh_url`).

initdb and pg_ctl refuse to run as root: as root they run as the `postgres` user, in a folder
that user owns under a parent it can traverse. Without the binaries the PostgreSQL tests skip,
saying why — or fail where `PCOR_POSTGRES_TESTS=required` (CI, `.ci/run`).
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

BIN = Path(os.environ.get("PCOR_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
REQUIRED = os.environ.get("PCOR_POSTGRES_TESTS") == "required"
TEMPLATE = "pcor_template"


def missing() -> str | None:
    """Why no server can be started here, or None."""
    if not (BIN / "initdb").exists() or not (BIN / "pg_ctl").exists():
        return f"no PostgreSQL binaries in {BIN} (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install '.[postgres]')"
    if os.geteuid() == 0 and shutil.which("su") is None:
        return "running as root without su: initdb cannot run as root"
    return None


def skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"PCOR_POSTGRES_TESTS=required, but {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL cluster in a scratch folder (`start`, `stop`)."""

    def __init__(self, *, listen: str = "127.0.0.1", durable: bool = False, trust: str | None = None) -> None:
        #: `listen`: the addresses it listens on (listen_addresses); `durable`: fsync and synchronous
        #: commits on, as a production server (the tests' default turns them off for speed);
        #: `trust`: a network (CIDR) whose connections are trusted too (loopback always is).
        self.listen = listen
        self.durable = durable
        self.trust = trust
        self.parent = Path(tempfile.mkdtemp(prefix="pcor-pg-"))
        self.root = self.parent / "cluster"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count()

    def _run(self, *argv: str) -> None:
        command = " ".join(shlex.quote(a) for a in argv)
        full = ["su", "postgres", "-s", "/bin/sh", "-c", command] if self._as_postgres else ["sh", "-c", command]
        done = subprocess.run(full, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def start(self) -> None:
        self.root.mkdir()
        if self._as_postgres:  # a mkdtemp folder is 0700 root: let the postgres user through to its own
            self.parent.chmod(0o755)
            shutil.chown(self.root, "postgres")
        data = self.root / "data"
        self._run(str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        if self.trust is not None:
            with open(data / "pg_hba.conf", "a", encoding="utf-8") as hba:
                hba.write(f"host all all {self.trust} trust\n")
        options = f"-p {self.port} -k {self.root} -c listen_addresses={self.listen} -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._options = options
        self._run(str(BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        import psycopg

        from pcor_sql.ledger.postgres_store import PostgresStore

        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {TEMPLATE}")
        PostgresStore(self.url(TEMPLATE)).close()  # the template holds the ledger's tables

    def halt(self) -> None:
        """Stop the server at once (as a crash: `-m immediate`), keeping its data for `resume`."""
        self._run(str(BIN / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")

    def resume(self) -> None:
        """Start a halted server again, on the same port and data."""
        self._run(str(BIN / "pg_ctl"), "-D", str(self.root / "data"), "-o", self._options, "-l",
                  str(self.root / "log"), "-w", "start")

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def fresh_url(self) -> str:
        """A new database holding an empty ledger."""
        import psycopg

        name = f"ledger_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        with psycopg.connect(self.url(name), autocommit=True) as con:  # a ledger of its own, not the template's
            con.execute("UPDATE pcor.meta SET value = gen_random_uuid()::text WHERE name = 'ledger_id'")
        return self.url(name)

    def empty_url(self) -> str:
        """A new database without a ledger."""
        import psycopg

        name = f"empty_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(BIN / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.parent, ignore_errors=True)
