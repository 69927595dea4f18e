"""Opening the data a command works on: a DuckDB file, the bundled demo tables in memory, or a
SparkSession. (Where the budget ledger lives is decided by `ledger.location`, once.)

Without a file, a fresh in-memory database gets the bundled tables that the text of the
request names (`reads`; all of them when there is no text, e.g. an interactive prompt): `SELECT salary FROM salaries WHERE id = 42` loads `salaries` only,
not all three (each load is some ten statements and a Parquet read).

A file path must exist (a mistyped path must not open a fresh ledger in which nothing has been
spent yet); it is opened through `connect_with_retry` (it waits while another process holds
the file's lock). A file marked read-only (no write permission, or no write bit in its mode —
also heeded when running as root) is opened read-only: queries and `coe` work, and a release is
refused by the ledger ("read-only: the budget ledger cannot be charged") before any work is done.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from pcor_sql.engine.datasets import BUNDLED, load_dataset
from pcor_sql.errors import UserError
from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.sqltext.tokens import QUOTED_IDENT, WORD, significant, tokenize
from pcor_sql.backends.base import Engine

MAKE_ONE = "give an existing DuckDB file, e.g. one made by `pcor-sql examples export salaries FILE --format duckdb`"
SPARK_DB = "--db names a DuckDB database, and with --engine spark the rows are read by Spark"


def is_marked_read_only(path: Path) -> bool:
    if not os.access(path, os.W_OK):
        return True
    return not (path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def bundled_names_in(text: str | None) -> list[str]:
    """The bundled tables `text` names as words or quoted identifiers (any case), in load order;
    every one when there is no text to go by (an interactive prompt)."""
    if text is None:
        return list(BUNDLED)
    try:
        tokens = significant(tokenize(text))
    except UserError:
        return list(BUNDLED)  # text the tokenizer refuses: load everything, let the parser say why
    named = {t.text.strip('"').lower() for t in tokens if t.kind in (WORD, QUOTED_IDENT)}
    return [name for name in BUNDLED if name in named]


@contextmanager
def open_database(path: Path | None, reads: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to `path` (or to a fresh in-memory database with the bundled tables that
    `reads` names), closed at the end of the block."""
    if path is None:
        con = duckdb.connect()
        try:
            for name in bundled_names_in(reads):
                load_dataset(con, name)
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
    if not path.exists():
        raise UserError(f"database file {str(path)!r} does not exist", MAKE_ONE)
    if not path.is_file():
        raise UserError(f"{str(path)!r} is not a file", MAKE_ONE)
    try:
        return connect_with_retry(path, read_only=is_marked_read_only(path))
    except duckdb.Error as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise UserError(f"cannot open database {str(path)!r}: {first}", "check that it is a DuckDB database file") from None


@contextmanager
def open_data(db: Path | None, engine: str = Engine.DUCKDB, spark_master: str = "local[*]", reads: str | None = None,
              ) -> Iterator[Any]:
    """What holds the rows: the DuckDB connection of `open_database`, or a SparkSession on
    `spark_master` (one already running in this process is reused, and left running)."""
    if engine == Engine.DUCKDB:
        with open_database(db, reads) as con:
            yield con
        return
    if db is not None:
        raise UserError(SPARK_DB, "drop --db (the relation names Spark tables or files); give the ledger with --ledger PATH")
    from pcor_sql.backends.spark_session import start_spark

    yield start_spark(spark_master)
