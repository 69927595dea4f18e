"""The caller's connection: the one check that an argument is a DuckDB connection, and the
hint for a relation it cannot see.

Without the check, a string or None passed as `con` fails deep inside with "'str' object has
no attribute 'execute'"; every public entry point that takes a connection calls it first.

DuckDB finds a pandas, Polars or Arrow object named in FROM by looking through the Python
frames of the code that runs the query ("replacement scans"): when pcor-sql runs it, those
are pcor-sql's frames, not the caller's, so `FROM df` is "Table with name df does not exist".
The fix is to register the object on the connection; `relation_fix` says so.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from pcor_sql.errors import UserError, from_python

_MISSING = re.compile(r"Table with name (\S+?)!? does not exist")


def require_connection(con: Any, who: str) -> duckdb.DuckDBPyConnection:
    """`con` itself if it is a DuckDB connection; else a UserError naming `who` took it."""
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise UserError(
            f"{who} needs a DuckDB connection, got {type(con).__name__}",
            "pass duckdb.connect(...) (or an existing connection)",
        )
    return con


def relation_fix(exc: BaseException, fix: str) -> str:
    """`fix`, led — for a Python caller whose FROM names a table DuckDB cannot find — by how
    to make a DataFrame or Arrow table visible: `con.register('df', df)`."""
    found = _MISSING.search(str(exc))
    if found is None or not from_python():
        return fix
    name = found.group(1).strip('"')
    return (
        f"if {name} is a pandas, Polars or Arrow object, register it on the connection first: "
        f"con.register({name!r}, {name}); otherwise {fix}"
    )
