"""The database a command works on (`--db PATH`), and its budget ledger (`--ledger PATH`).

Without `--db`: a fresh in-memory database with the bundled datasets loaded, so every command
runs with no set-up. Its budget ledger is a file (DESIGN.md §6): `--ledger PATH`, else
`$PCOR_SQL_LEDGER`, else the per-user ledger under the XDG data directory; the bundled tables
are the same units there in every run. `--ledger :memory:` keeps it in memory, with a warning.
With `--db FILE` the ledger lives in that file (schema `pcor`), and `--ledger` is an error.

With `--db PATH`: that DuckDB file, opened through `connect_with_retry` (it waits while another
process holds the file's lock). A missing file is an error rather than a new empty database: a
mistyped path must not open a fresh ledger in which nothing has been spent yet. A file marked
read-only (no write permission, or no write bit in its mode — also heeded when running as
root) is opened read-only: queries and `coe` work, and a release is refused by the ledger
("read-only: the budget ledger cannot be charged") before any work is done.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from pcor_sql.errors import UserError

_MAKE_ONE = "give an existing DuckDB file, e.g. one made by `pcor-sql datasets export salaries FILE --format duckdb`"


def is_marked_read_only(path: Path) -> bool:
    if not os.access(path, os.W_OK):
        return True
    return not (path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@contextmanager
def open_database(path: Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to `path` (or to a fresh in-memory database with the bundled datasets),
    closed at the end of the block."""
    if path is None:
        from pcor_sql.engine.datasets import load_all

        con = duckdb.connect()
        try:
            load_all(con)
        except BaseException:
            con.close()
            raise
    else:
        con = _connect_file(Path(path))
    try:
        yield con
    finally:
        con.close()


def _connect_file(path: Path) -> duckdb.DuckDBPyConnection:
    from pcor_sql.ledger.database_file import connect_with_retry

    if not path.exists():
        raise UserError(f"database file {str(path)!r} does not exist", _MAKE_ONE)
    if not path.is_file():
        raise UserError(f"{str(path)!r} is not a file", _MAKE_ONE)
    try:
        return connect_with_retry(path, read_only=is_marked_read_only(path))
    except duckdb.Error as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise UserError(f"cannot open database {str(path)!r}: {first}", "check that it is a DuckDB database file") from None


@contextmanager
def open_owner(db: Path | None, ledger: str | None = None, *, allow_seeded: bool = False,
               engine: str = "duckdb", spark_master: str = "local[*]") -> Iterator[Any]:
    """The owner's handle on `db` (see `open_database`) — or, with engine "spark", on a
    SparkSession on `spark_master` — with the ledger the options choose, warnings printed on
    stderr; closed at the end of the block. Spark's data is in no DuckDB file, so its ledger is
    always `--ledger`, else `$PCOR_SQL_LEDGER`, else the per-user ledger, as for no `--db`."""
    from pcor_sql.cli.console import make_warn
    from pcor_sql.ledger.location import ENV, default_ledger_path
    from pcor_sql.owner import Owner

    if db is not None and engine == "spark":
        raise UserError(_SPARK_DB, "drop --db (the relation names Spark tables or files); give the ledger with --ledger PATH")
    if db is not None and ledger is not None:
        raise UserError(
            "--ledger was given with --db: a database file keeps its own budget ledger",
            "drop --ledger (a second ledger would let the same data be spent twice)",
        )
    choice = ledger if db is None and ledger is not None else None
    if db is None and choice is None:
        choice = os.environ.get(ENV) or str(default_ledger_path())
    with _data(db, engine, spark_master) as con:
        owner = Owner(con, choice, warn=make_warn(), allow_seeded=allow_seeded)
        try:
            yield owner
        finally:
            owner.ledger.close()


@contextmanager
def open_session(db: Path | None, engine: str = "duckdb", spark_master: str = "local[*]") -> Iterator[Any]:
    """A Session on the data (`open_database`, or a SparkSession) for the owner's uncharged
    work (`coe`): its ledger is never opened."""
    from pcor_sql.cli.console import make_warn
    from pcor_sql.session import Session

    if db is not None and engine == "spark":
        raise UserError(_SPARK_DB, "drop --db (the relation names Spark tables or files)")
    with _data(db, engine, spark_master) as con:
        yield Session(con, warn=make_warn())


_SPARK_DB = "--db names a DuckDB database, and with --engine spark the rows are read by Spark"


@contextmanager
def _data(db: Path | None, engine: str, spark_master: str) -> Iterator[Any]:
    """What holds the rows: the DuckDB connection of `open_database`, or a SparkSession on
    `spark_master` (one already running in this process is reused, and left running)."""
    if engine == "duckdb":
        with open_database(db) as con:
            yield con
        return
    from pcor_sql.backends.spark_session import start_spark

    yield start_spark(spark_master)
