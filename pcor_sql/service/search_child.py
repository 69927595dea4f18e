"""The service's search processes' entry point: the engine's child loop
(`engine.search_processes.main`) after loading every built-in verifier's compiled checks.

Why here: the warm-up runs real searches through the package's front door (a Session, the
pipeline, an in-memory ledger) on a made-up table, which the engine layer may not import.
"""

from __future__ import annotations

import warnings

import duckdb

from pcor_sql.api import explain_outliers
from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES
from pcor_sql.engine import search_processes
from pcor_sql.session import Session

#: The warm-up's table: small, an outlier in every verifier's eyes at id 0.
_WARM_TABLE = ("CREATE TABLE t AS SELECT i AS id, (i % 3)::VARCHAR AS a, (i % 2)::VARCHAR AS b, "
               "CASE WHEN i = 0 THEN 1000.0 ELSE (i % 97)::DOUBLE / 7 + 1 END AS v FROM range(600) t(i)")


def warm_kernels() -> list[str]:
    """Loads the compiled checks (from numba's cache) before the first request: one seeded
    search per built-in verifier on a made-up table, in this child's own in-memory DuckDB and
    ledger, its results dropped. Without it the first search a child runs pays ~0.4 s; with
    it the service's start pays, once per child, before any request. Returns the verifiers
    whose warm-up search released a context (the tests read it)."""
    released = []
    con = duckdb.connect()
    try:
        con.execute(_WARM_TABLE)
        session = Session(con, ledger=":memory:", warn=lambda message: None, allow_seeded=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for verifier in BUILTIN_NAMES:
                try:
                    [result] = explain_outliers(None, "SELECT v FROM t WHERE id = 0", session=session,
                                                by=["a", "b"], verifier=verifier, epsilon=1.0, seed=1)
                    if result.released:
                        released.append(verifier)
                except Exception:  # a warm-up that finds nothing still loaded its kernels
                    pass
    finally:
        con.close()
    return released


def main(fd: int, owner: int) -> None:
    search_processes.main(fd, owner, warm_kernels)
