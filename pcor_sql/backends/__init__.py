"""Data access: where a job's rows are read — DuckDB (embedded, the default) or Spark."""

from __future__ import annotations

import duckdb

from pcor_sql.backends.base import DataAccess
from pcor_sql.errors import UserError


def open_access(con: object) -> DataAccess:
    """The data access for `con`: a DuckDB connection, or a pyspark SparkSession. (The budget
    ledger is not data access: `pcor_sql.ledger.location` places it.)"""
    from pcor_sql.backends.spark_session import is_spark_session

    if isinstance(con, duckdb.DuckDBPyConnection):
        from pcor_sql.backends.duckdb_access import DuckDBAccess

        return DuckDBAccess(con)
    if is_spark_session(con):
        from pcor_sql.backends.spark_access import SparkAccess

        return SparkAccess(con)
    raise UserError(
        f"a Session needs a DuckDB connection or a SparkSession, got {type(con).__name__}",
        "pass duckdb.connect(...) (or an existing connection), or a pyspark SparkSession",
    )
