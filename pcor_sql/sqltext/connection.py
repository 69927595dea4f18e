"""The one check that an argument is a DuckDB connection, made where a caller hands one in.

Without it, a string or None passed as `con` fails deep inside with "'str' object has no
attribute 'execute'"; every public entry point that takes a connection calls this first.
"""

from __future__ import annotations

from typing import Any

import duckdb

from pcor_sql.errors import UserError


def require_connection(con: Any, who: str) -> duckdb.DuckDBPyConnection:
    """`con` itself if it is a DuckDB connection; else a UserError naming `who` took it."""
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise UserError(
            f"{who} needs a DuckDB connection, got {type(con).__name__}",
            "pass duckdb.connect(...) (or an existing connection)",
        )
    return con
