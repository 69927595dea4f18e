"""The data-access interface: every read of rows a job makes, whichever engine holds them.

A Session reads rows only through a `DataAccess`: the schema and the domains of a relation,
the selected records, the per-cell summary (and, for LOF and histogram, the values around a
record: the embedded engine's sorted index or an engine's per-cell windows), and the ball
counts of anomaly identification. The searches, the mechanisms and the budget ledger run
locally and never see an engine: they get summaries, windows and counts.

Two implementations: `DuckDBAccess` (embedded, the default; the ledger lives in the same
database) and `SparkAccess` (rows stay in the cluster; only per-cell summaries, windows and
per-record counts come back as Arrow; the ledger is a DuckDB file of its own: `ledger=`,
`$PCOR_SQL_LEDGER` or the per-user file, see `pcor_sql.ledger.location`).

All SQL handed to an access is DuckDB's text (what the front end and `sqltext.build` write);
an engine with another dialect rewrites it (`sqltext.dialect`).
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager, Mapping, Protocol, Sequence

import duckdb
import pyarrow as pa

from pcor_sql.anomaly.balls import BallCounts
from pcor_sql.engine.record_search import SelectedRecord
from pcor_sql.engine.schema import Described, Schema
from pcor_sql.engine.summary import CellSummary
from pcor_sql.core.choices import Engine
from pcor_sql.core.verifiers.capabilities import Reads

Warn = Callable[[str], None]
Records = tuple[dict[str, Any], ...]



class DataAccess(Protocol):
    """Where a Session's rows are read."""

    engine: "Engine"
    #: What of a population this engine serves a verifier (`core.verifiers.capabilities.Reads`):
    #: `Session.verifier` refuses a verifier that reads anything else, before any reservation.
    serves: frozenset[Reads]
    source: Any  # what the caller gave: the DuckDB connection or the SparkSession
    parser: duckdb.DuckDBPyConnection  # DuckDB, to parse request text; never reads rows
    # The DuckDB connection `open_ledger` anchors the ledger on: DuckDB's own (the ledger is
    # pinned to its file, if any); for another engine a private in-memory one (one per engine
    # session), used only when an in-memory ledger is asked for.
    ledger_con: duckdb.DuckDBPyConnection

    def describe(self, relation_sql: str, metric_sql: str, *, along: str | None = None) -> tuple[Described, tuple | None]:
        """(columns with types and NOT NULL, the metric's type) in DuckDB's type names; `along`,
        a one-row catalog SELECT of the ledger's database, rides along where the engine is that
        database (else None comes back)."""
        ...

    def schema(self, relation_sql: str, metric_sql: str, *, by: Sequence[str] | None,
               domains: Mapping[str, Sequence[Any]] | None, warn: Warn | None, described: Described) -> Schema:
        """The context attributes and their domains (data-derived ones read distinct values)."""
        ...

    def records(self, relation_sql: str, metric_sql: str, selector_sql: str) -> tuple[SelectedRecord, ...]:
        """The rows the selector picks, in a stable order, with the metric as a float."""
        ...

    def summary(self, schema: Schema, *, with_values: bool) -> CellSummary:
        """The per-cell summary; `with_values`: LOF/histogram/Python verifiers will read values."""
        ...

    def columns(self, select_sql: str) -> list[str]:
        """The column names of a SELECT (to expand `*`), without reading rows."""
        ...

    def ball_counts(self, relation_sql: str, columns: Sequence[str], selector_sql: str | None, radius: float,
                    norm: str) -> tuple[Records, BallCounts]:
        """The selected records (in scan order) and, per record, x_i and B_x(i, r) against
        every row (DESIGN.md §3; distances exactly as `pcor_sql.anomaly.balls` computes them)."""
        ...

    def point_counts(self, relation_sql: str, columns: Sequence[str], point: Sequence[float], radius: float,
                     norm: str) -> BallCounts:
        """x_i and B_x(i, r) of one point of the metric space (in the data or not) against every row."""
        ...

    def units(self, sql: str) -> tuple[Any, ...]:
        """The privacy units a whole SELECT statement reads — relation, select list, WHERE,
        subqueries — or a relation alone (each unit with a `name`), from the catalog alone."""
        ...

    def watch(self, progress: Any, label: str) -> ContextManager[None]:
        """Within the block, report phase `label` and, where the engine can, the running query's progress."""
        ...

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """Run a SELECT (DuckDB's text, `$1`-style parameters) and return its rows."""
        ...

    def render(self, sql: str) -> str:
        """SQL shown to the user (an explanation's query), in the engine's own dialect."""
        ...

