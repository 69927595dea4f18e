"""The database a command works on (`--db PATH`).

Without `--db`: a fresh in-memory database with the bundled datasets loaded, so every command
runs with no set-up (its budget ledger is in memory too, and the library warns so).

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
from typing import Any, Callable, Iterator

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
        from pcor_sql.engine.ledger import Ledger

        con = duckdb.connect()
        try:
            load_all(con)
            Ledger(con)  # the scratch database's (in-memory) ledger tables, made with its data
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
    from pcor_sql.engine.database_file import connect_with_retry

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
def open_session(path: Path | None, engine: str, spark_master: str, warn: Callable[[str], None]) -> Iterator[Any]:
    """A Session on the engine a command names. duckdb: the database of `open_database`.
    spark: a SparkSession on `spark_master` (one already running in this process is reused);
    `path`, if given, is the DuckDB file that holds the budget ledger (it must exist, as for
    duckdb), else the ledger is in memory (and the library warns so)."""
    from pcor_sql.session import Session

    if engine == "duckdb":
        with open_database(path) as con:
            yield Session(con, warn=warn)
        return
    from pcor_sql.backends.spark_session import start_spark

    spark = start_spark(spark_master)
    ledger = None if path is None else _connect_file(Path(path))
    try:
        yield Session(spark, warn=warn, ledger_db=ledger)
    finally:
        if ledger is not None:
            ledger.close()
