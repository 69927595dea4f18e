"""The Spark engine: rows stay in the cluster; summaries, windows and counts come back as Arrow.

What each job reads, and what leaves the cluster (`rows_pulled` counts it):
- schema and domains: the analyzer's schema of `SELECT *, <metric>` (no rows); a domain not
  declared is the column's distinct values (one row per value);
- the selected records: the rows the WHERE clause picks;
- the per-cell summary: one GROUP BY (one row per cell: count, mean, variance, min, max);
- LOF and histogram: per record, the per-cell windows around its value (at most
  cells × (2·depth + 1) rows, `pcor_sql.engine.window`), read in two scans that shuffle only
  the rows near the value (`pcor_sql.backends.spark_windows`), and, rarely, per-cell range
  counts;
- anomaly identification: the selected records and one (x_i, B_x(i, r)) pair per distinct
  selected point (`pcor_sql.backends.spark_balls`).
None of these grows with the table's size except the records a request itself selects.

Request text is parsed by DuckDB's parser (a private in-memory DuckDB that holds no data) and
run on Spark after the lexical rewrite of `pcor_sql.sqltext.dialect`. The budget ledger is a
DuckDB file placed by `pcor_sql.ledger.location` (`ledger=`, `$PCOR_SQL_LEDGER`, else
the per-user file); `ledger_con` is only the anchor of an in-memory ledger asked for with
`":memory:"`: one per SparkSession, kept for the session's life (with the in-memory warning).
"""

from __future__ import annotations

import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import pyarrow as pa

from pcor_sql.anomaly.balls import BallCounts
from pcor_sql.backends.base import Engine, Records, Warn
from pcor_sql.backends.spark_windows import TwoScanWindowReader
from pcor_sql.backends.spark_session import require_spark, spark_error
from pcor_sql.core.verifiers.capabilities import Reads
from pcor_sql.engine.progress import report_phase
from pcor_sql.engine.record_search import SelectedRecord, records_sql, selected_records
from pcor_sql.engine.schema import Described, Schema, resolve_schema
from pcor_sql.engine.summary import CellSummary, summary_from_moments
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import METRIC_ALIAS, aliased, as_double, double_literal, distinct_values, quoted, select_from
from pcor_sql.sqltext.dialect import spark_sql
from pcor_sql.sqltext.tokens import PARAM, tokenize

_METRIC_PROBE = "__pcor_metric_type"
_INF = double_literal(float("inf"))
# One in-memory ledger anchor per SparkSession, so that module-level calls on one SparkSession
# asking for ":memory:" share a ledger as calls on one in-memory DuckDB connection do.
_LEDGERS: "weakref.WeakKeyDictionary[Any, duckdb.DuckDBPyConnection]" = weakref.WeakKeyDictionary()


class SparkAccess:
    """Rows read by Spark through `spark` (a pyspark SparkSession)."""

    engine = Engine.SPARK
    # Per-cell windows serve the values near v; all of a context's values would bring the
    # table back to the driver (`engine.window.WindowPopulation.values`).
    serves = frozenset({Reads.MOMENTS, Reads.NEAR, Reads.SQL})

    def __init__(self, spark: Any):
        require_spark()
        self.source = spark
        self.spark = spark
        self.parser = duckdb.connect()
        self.ledger_con = _ledger_anchor(spark)
        self.rows_pulled = 0
        self.queries = 0

    # ---- running SQL --------------------------------------------------------------------

    def dataframe(self, sql: str, fix: str = "check the relation, metric and attribute names") -> Any:
        """`sql` (DuckDB's text) analyzed by Spark; errors are one-line UserErrors."""
        try:
            return self.spark.sql(spark_sql(sql))
        except UserError:
            raise
        except Exception as exc:  # AnalysisException, ParseException: the user's SQL
            raise spark_error(exc, fix) from None

    def arrow(self, sql: str, params: Sequence[Any] = (), fix: str = "check the relation, metric and attribute names") -> pa.Table:
        df = self.dataframe(_bind(sql, params), fix)
        try:
            table = df.toArrow()
        except Exception as exc:  # a failure while running (a bad cast, a missing file)
            raise spark_error(exc, fix) from None
        self.rows_pulled += table.num_rows
        self.queries += 1
        return table

    def render(self, sql: str) -> str:
        return spark_sql(sql)

    @contextmanager
    def watch(self, progress: Any, label: str) -> Iterator[None]:
        # Spark's job progress is not polled: the phase is announced, the bar waits.
        report_phase(progress, label)
        yield

    # ---- what a release reads -----------------------------------------------------------

    def describe(self, relation_sql: str, metric_sql: str, *, along: str | None = None) -> tuple[Described, tuple | None]:
        # `along` asks for the ledger's catalog row with the DESCRIBE: the ledger is not in
        # Spark, so it is read from its own database (None here).
        try:
            fields = self._fields(select_from(["*", aliased(metric_sql, _METRIC_PROBE)], relation_sql), "")
        except UserError:
            columns = self._fields(select_from("*", relation_sql), "check the FROM clause names an existing table, view or file")
            metric = self._fields(select_from(f"{metric_sql} AS {METRIC_ALIAS}", relation_sql), "check the metric column name")
            return (columns, metric[0][1]), None
        return (fields[:-1], fields[-1][1]), None

    def schema(self, relation_sql: str, metric_sql: str, *, by: Sequence[str] | None,
               domains: Mapping[str, Sequence[Any]] | None, warn: Warn | None, described: Described) -> Schema:
        def distinct(name: str) -> list[Any]:
            return self.arrow(distinct_values(relation_sql, name)).column(0).to_pylist()

        # Declared values are cast to the column types by DuckDB's rules (on the parser, which
        # holds no data); the types were named in DuckDB's terms by `describe`.
        return resolve_schema(self.parser, relation_sql, metric_sql, by=by, domains=domains, warn=warn,
                              described=described, distinct=distinct)

    def records(self, relation_sql: str, metric_sql: str, selector_sql: str) -> tuple[SelectedRecord, ...]:
        table = self.arrow(records_sql(relation_sql, metric_sql, selector_sql), fix="check the WHERE clause that picks the record")
        rows = list(zip(*(c.to_pylist() for c in table.columns))) if table.num_columns else []
        return selected_records(table.column_names, rows)

    def summary(self, schema: Schema, *, with_values: bool) -> CellSummary:
        """One GROUP BY for the moments. Values (LOF, histogram) are read later, per record, as
        per-cell windows: nothing to read up front whatever `with_values` says."""
        started = time.perf_counter()
        table = self.arrow(_group_by_cells(schema))
        summary = summary_from_moments(schema, table, started, None)
        summary.windows = TwoScanWindowReader(self.arrow, schema, summary.coords, summary.vmin, summary.vmax)
        return summary

    def columns(self, select_sql: str) -> list[str]:
        return list(self.dataframe(select_sql, "check the FROM clause and the column names").columns)

    def ball_counts(self, relation_sql: str, columns: Sequence[str], selector_sql: str | None, radius: float,
                    norm: str) -> tuple[Records, BallCounts]:
        from pcor_sql.backends.spark_balls import spark_ball_counts

        return spark_ball_counts(self, relation_sql, columns, selector_sql, radius, norm)

    def point_counts(self, relation_sql: str, columns: Sequence[str], point: Sequence[float], radius: float,
                     norm: str) -> BallCounts:
        from pcor_sql.backends.spark_balls import spark_point_counts

        return spark_point_counts(self, relation_sql, columns, point, radius, norm)

    def units(self, relation_sql: str) -> tuple[Any, ...]:
        """The privacy units `relation_sql` reads: catalog tables by their identifiers
        (`spark_catalog.default.t`), files by path (`file:/abs/x.parquet`)."""
        from pcor_sql.backends.spark_units import spark_units

        return spark_units(self, relation_sql)

    # ---- helpers ------------------------------------------------------------------------

    def _fields(self, select_sql: str, fix: str) -> list[tuple[str, str, bool]]:
        """(name, DuckDB type name, declared NOT NULL) of each column of a SELECT, from the analyzer."""
        df = self.dataframe(select_sql, fix)
        return [(f.name, duckdb_type(f.dataType), not f.nullable) for f in df.schema.fields]


def duckdb_type(spark_type: Any) -> str:
    """A Spark SQL type by DuckDB's name for it (the engine's vocabulary of types)."""
    name = type(spark_type).__name__
    simple = {
        "ByteType": "TINYINT", "ShortType": "SMALLINT", "IntegerType": "INTEGER", "LongType": "BIGINT",
        "FloatType": "FLOAT", "DoubleType": "DOUBLE", "StringType": "VARCHAR", "VarcharType": "VARCHAR",
        "CharType": "VARCHAR", "BooleanType": "BOOLEAN", "DateType": "DATE", "TimestampType": "TIMESTAMP WITH TIME ZONE",
        "TimestampNTZType": "TIMESTAMP", "BinaryType": "BLOB",
    }
    if name in simple:
        return simple[name]
    if name == "DecimalType":
        return f"DECIMAL({spark_type.precision},{spark_type.scale})"
    return spark_type.simpleString().upper()


def _group_by_cells(schema: Schema) -> str:
    """`sqltext.build.group_by_cells` in functions Spark has (no isinf, no FILTER needed)."""
    cols = ", ".join(quoted(schema.names))
    m = METRIC_ALIAS
    inner = select_from(f"{cols}, {as_double(schema.metric_sql)} AS {m}", schema.relation_sql)
    return select_from(
        f"{cols}, count(*) AS n, count_if({m} IS NULL OR isnan({m}) OR abs({m}) = {_INF}) AS bad, "
        f"avg({m}) AS mean, var_pop({m}) AS var, min({m}) AS lo, max({m}) AS hi",
        f"({inner})",
        group_by=cols,
    )


def _bind(sql: str, params: Sequence[Any]) -> str:
    """`$1`-style parameters written into the text as literals (floats exactly)."""
    if not params:
        return sql
    out = []
    for tok in tokenize(sql):
        if tok.kind == PARAM and tok.text[1:].isdigit():
            value = params[int(tok.text[1:]) - 1]
            if not isinstance(value, float):
                raise InternalError(f"only float parameters are bound for Spark, got {type(value).__name__}")
            out.append(double_literal(value))
        else:
            out.append(tok.text)
    return "".join(out)


def _ledger_anchor(spark: Any) -> duckdb.DuckDBPyConnection:
    con = _LEDGERS.get(spark)
    if con is None:
        con = _LEDGERS[spark] = duckdb.connect()
    return con
