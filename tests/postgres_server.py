"""A real PostgreSQL server for the tests of the PostgreSQL ledger (DESIGN.md §11: the same test
suite runs on both stores), started once per test session from the Debian `postgresql`
package's binaries, on a free loopback port, trusting loopback connections; each test gets an
empty ledger of its own (`fresh_url`): a database an earlier test used, emptied, or else a new
copy of a template that already holds the ledger's tables.

Emptying a used database (its other connections ended, every ledger row deleted, a new ledger id)
takes ~0.04 s where a copy of the template takes ~0.3 s, and leaves no pile of databases to delete
at the end; a database whose tables or columns a test changed is dropped, never lent again.

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
        self._lent: list[str] = []  # databases handed to the running test
        self._spare: list[str] = []  # databases earlier tests used, to empty before lending again
        self._layout: list[tuple] = []  # the template's tables, columns and indexes

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
        with psycopg.connect(self.url(TEMPLATE), autocommit=True) as con:
            self._layout = _layout(con)

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
        """A database holding an empty ledger of its own (a new ledger id), which nothing else
        reaches until the running test ends (`take_back`)."""
        import psycopg

        while self._spare:
            name = self._spare.pop()
            if self._emptied(name):
                break
            with psycopg.connect(self.url("postgres"), autocommit=True) as con:
                con.execute(f"DROP DATABASE {name} WITH (FORCE)")
        else:
            name = f"ledger_{next(self._names)}"
            with psycopg.connect(self.url("postgres"), autocommit=True) as con:
                con.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
            with psycopg.connect(self.url(name), autocommit=True) as con:  # a ledger of its own, not the template's
                con.execute("UPDATE pcor.meta SET value = gen_random_uuid()::text WHERE name = 'ledger_id'")
        self._lent.append(name)
        return self.url(name)

    def take_back(self) -> None:
        """The running test has ended: the databases it was lent may be emptied and lent again."""
        self._spare.extend(self._lent)
        self._lent.clear()

    def _emptied(self, name: str) -> bool:
        """Empty used database `name` as a new copy of the template would be, or say it cannot be
        (a test changed its tables): its other connections are ended first (a ledger a test left
        open, a transaction left holding locks), then every ledger row is deleted (DELETE, not
        TRUNCATE: ~0.01 s against ~0.08 s for these few small tables) and the ledger gets a new id."""
        import psycopg

        with psycopg.connect(self.url(name), autocommit=True) as con:
            con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()")
            if _layout(con) != self._layout:
                return False
            tables = [row[0] for row in con.execute("SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
                                                    " WHERE schemaname = 'pcor' AND tablename <> 'meta'")]
            with con.transaction():
                con.execute("SET LOCAL session_replication_role = replica")  # no foreign-key order to keep
                for table in tables:
                    con.execute(f"DELETE FROM {table}")
                for (sequence,) in con.execute("SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences"
                                               " WHERE schemaname = 'pcor'").fetchall():
                    con.execute(f"ALTER SEQUENCE {sequence} RESTART")
                con.execute("UPDATE pcor.meta SET value = gen_random_uuid()::text WHERE name = 'ledger_id'")
        return True

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


_SYSTEM = "('pg_catalog', 'information_schema', 'pg_toast')"


def _layout(con) -> list[tuple]:
    """Every table, column, index, constraint, trigger and function outside PostgreSQL's own
    schemas, and the names of the ledger's meta rows: what a test could change that deleting the
    rows would not undo."""
    import psycopg

    queries = (
        "SELECT table_schema, table_name, column_name, data_type, column_default, is_nullable"
        f" FROM information_schema.columns WHERE table_schema NOT IN {_SYSTEM}",
        f"SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        f" WHERE n.nspname NOT IN {_SYSTEM}",
        f"SELECT schemaname, indexname, indexdef FROM pg_indexes WHERE schemaname NOT IN {_SYSTEM}",
        "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
        f" JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname NOT IN {_SYSTEM}",
        "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal",
        f"SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        f" WHERE n.nspname NOT IN {_SYSTEM}",
        "SELECT name FROM pcor.meta",
    )
    try:
        return [sorted(con.execute(query).fetchall(), key=repr) for query in queries]
    except psycopg.Error:  # no pcor.meta: a test dropped the ledger's tables
        return []
