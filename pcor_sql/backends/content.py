"""What a data access can say about the content it reads (DESIGN.md §11 "Units across hosts"):
a relation's content fingerprint (`engine.content_fingerprint`), on DuckDB only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, cast

from pcor_sql.backends.base import DataAccess, Engine

if TYPE_CHECKING:
    from pcor_sql.backends.duckdb_access import DuckDBAccess
    from pcor_sql.engine.content_fingerprint import Fingerprint


def fingerprinter(access: DataAccess) -> Callable[[str], Fingerprint] | None:
    """`relation → Fingerprint` over `access`'s DuckDB connection; None on Spark (its datasets
    carry no fingerprint, and a service on Spark checks none)."""
    if access.engine != Engine.DUCKDB:
        return None
    from pcor_sql.engine.content_fingerprint import content_fingerprint

    con = cast("DuckDBAccess", access).con  # the engine is DuckDB's
    return lambda relation: content_fingerprint(con, relation)
