"""The statements an action runs on a connection, read from DuckDB's own query log."""

from __future__ import annotations

from typing import Any, Callable

import duckdb


def statements_run(con: duckdb.DuckDBPyConnection, action: Callable[[], Any]) -> tuple[Any, list[str]]:
    """(what `action` returns, the SQL statements it ran on `con`, in the order they ran)."""
    con.execute("CALL enable_logging('QueryLog')")
    try:
        con.execute("CALL truncate_duckdb_logs()")
        result = action()
        rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog' ORDER BY query_id").fetchall()
    finally:
        con.execute("CALL disable_logging()")
    # The log's own housekeeping is logged too; it is not the action's.
    return result, [r[0] for r in rows if "duckdb_logs" not in r[0]]
