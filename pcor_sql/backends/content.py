"""What a data access can say about the content it reads (DESIGN.md §11 "Units across hosts"):
a relation's content fingerprint (`engine.content_fingerprint`), on DuckDB only."""

from __future__ import annotations

from typing import Any, Callable

from pcor_sql.backends.base import Engine


def fingerprinter(access: Any) -> Callable[[str], Any] | None:
    """`relation → Fingerprint` over `access`'s DuckDB connection; None on Spark (its datasets
    carry no fingerprint, and a service on Spark checks none)."""
    if access.engine != Engine.DUCKDB:
        return None
    from pcor_sql.engine.content_fingerprint import content_fingerprint

    return lambda relation: content_fingerprint(access.con, relation)
