"""The embedded engine: DuckDB reads the rows in-process (what pcor-sql has always done).

Every method wraps the engine function that did the read before this interface existed, so
the DuckDB path runs the same statements as before; the ledger lives in the same database.
"""

from __future__ import annotations

from typing import Any, ContextManager, Mapping, Sequence

import duckdb
import pyarrow as pa

from pcor_sql.anomaly.balls import BallCounts
from pcor_sql.anomaly.points import load_points, load_values, point_ball_counts, relation_ball_counts
from pcor_sql.backends.base import Engine, Records, Warn
from pcor_sql.core.verifiers.capabilities import Reads
from pcor_sql.engine.progress import watch_query
from pcor_sql.engine.record_search import SelectedRecord, load_records
from pcor_sql.engine.schema import Described, Schema, describe_with_metric, resolve_schema
from pcor_sql.engine.summary import CellSummary, build_summary
from pcor_sql.errors import UserError
from pcor_sql.sqltext.build import describe


class DuckDBAccess:
    """Rows read by DuckDB on `con`, the caller's connection (also the ledger's database)."""

    engine = Engine.DUCKDB
    serves = frozenset(Reads)  # every value is in the sorted runs; SQL runs on the connection

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.source = con
        self.con = con
        self.parser = con
        self.ledger_con = con
        self._home: Any = None
        self._units_memo: dict[tuple[str, str], tuple[Any, ...]] = {}

    def describe(self, relation_sql: str, metric_sql: str, *, along: str | None = None) -> tuple[Described, tuple | None]:
        return describe_with_metric(self.con, relation_sql, metric_sql, along=along)

    def schema(self, relation_sql: str, metric_sql: str, *, by: Sequence[str] | None,
               domains: Mapping[str, Sequence[Any]] | None, warn: Warn | None, described: Described) -> Schema:
        return resolve_schema(self.con, relation_sql, metric_sql, by=by, domains=domains, warn=warn, described=described)

    def records(self, relation_sql: str, metric_sql: str, selector_sql: str) -> tuple[SelectedRecord, ...]:
        return load_records(self.con, relation_sql, metric_sql, selector_sql)

    def summary(self, schema: Schema, *, with_values: bool) -> CellSummary:
        return build_summary(self.con, schema, with_values=with_values)

    def columns(self, select_sql: str) -> list[str]:
        try:
            return [str(r[0]) for r in self.con.execute(describe(select_sql)).fetchall()]
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(first, "check the FROM clause and the column names") from None

    def ball_counts(self, relation_sql: str, columns: Sequence[str], selector_sql: str | None, radius: float,
                    norm: str) -> tuple[Records, BallCounts]:
        # Embedded: every point comes into numpy, which counts by sorted ranges and strips.
        points = load_points(self.con, relation_sql, columns, selector_sql)
        return points.records, relation_ball_counts(points, radius, norm)

    def point_counts(self, relation_sql: str, columns: Sequence[str], point: Sequence[float], radius: float,
                     norm: str) -> BallCounts:
        return point_ball_counts(load_values(self.con, relation_sql, columns), point, radius, norm)

    def units(self, sql: str) -> tuple[Any, ...]:
        """The units a SELECT statement, or a relation alone, reads (`pcor_sql.engine.units`),
        from the catalog as it is at every call: the connection's default database (which never
        changes) is kept, and the answers for queries of base tables, under the catalog they
        were resolved from (`resolve_units(memo=...)`)."""
        from pcor_sql.engine.units import resolve_units

        return resolve_units(self.con, sql, home=self.home, memo=self._units_memo)

    def home(self) -> Any:
        """The connection's default database (`engine.unit_names.Home`), read once."""
        if self._home is None:
            from pcor_sql.engine.unit_names import home_database

            self._home = home_database(self.con)
        return self._home

    def watch(self, progress: Any, label: str) -> ContextManager[None]:
        return watch_query(self.con, progress, label)

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        return self.con.sql(sql, params=list(params) or None).to_arrow_table()

    def render(self, sql: str) -> str:
        return sql
