"""The records of a DuckDB relation as points for the ball counts (DESIGN.md §3).

DuckDB reads and checks the relation in one scan (`load_points`): every row's values on the
chosen numeric columns (as DOUBLE), whether the record selector picks it, and the whole row so
that each answer names its record. The counting itself (`pcor_sql.anomaly.balls`) runs in numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from pcor_sql.anomaly.balls import BallCounts, ball_counts
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import aliased, as_double, count_where, describe, quoted, select_from
from pcor_sql.sqltext.connection import relation_fix

_NUMERIC_PREFIXES = tuple(
    "TINYINT SMALLINT INTEGER BIGINT HUGEINT UTINYINT USMALLINT UINTEGER UBIGINT UHUGEINT "
    "FLOAT REAL DOUBLE DECIMAL NUMERIC".split()
)


@dataclass(frozen=True)
class PointData:
    """The records of a relation on the chosen numeric columns.

    `values` holds every row (N × d, float64, −0.0 normalised to 0.0); `selected` the row
    positions picked by the selector, in scan order; `records` the selected rows, every column
    as DuckDB returns it (so an answer names its record, e.g. by id), one dict per selected row.
    """

    columns: tuple[str, ...]
    values: np.ndarray
    selected: np.ndarray
    records: tuple[dict[str, Any], ...]


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _is_numeric(type_name: str) -> bool:
    upper = type_name.upper()
    return any(upper == p or upper.startswith(p + "(") for p in _NUMERIC_PREFIXES)


def selected_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """The selected column names, each once (no data read; shared by both engines)."""
    if isinstance(columns, str) or not columns:
        raise UserError("no columns to measure distances on", "select one or more numeric columns")
    cols = tuple(columns)
    if len(set(cols)) != len(cols):
        raise UserError(f"a column is selected twice in {list(cols)}", "select each column once")
    return cols


def require_numeric(cols: Sequence[str], types: Sequence[str], is_numeric: Callable[[str], bool]) -> tuple[str, ...]:
    """`cols` if every type (in the engine's spelling) is numeric, else the error naming the first."""
    for name, type_name in zip(cols, types):
        if not is_numeric(type_name):
            raise UserError(
                f"column {name!r} has type {type_name}, not a number",
                "anomaly queries measure distances on numeric columns: cast it or pick another column",
            )
    return tuple(cols)


def check_columns(con: duckdb.DuckDBPyConnection, relation_sql: str, columns: Sequence[str]) -> tuple[str, ...]:
    """The column names, after checking they exist in the relation and are numeric."""
    cols = selected_columns(columns)
    try:
        described = con.execute(describe(select_from(quoted(cols), relation_sql))).fetchall()
    except duckdb.Error as err:
        raise UserError(
            f"cannot read columns {', '.join(cols)} from {relation_sql}: {_first_line(err)}",
            relation_fix(err, "check the relation and the column names"),
        ) from None
    return require_numeric(cols, [str(row[1]) for row in described], _is_numeric)


def check_finite(con: duckdb.DuckDBPyConnection, relation_sql: str, columns: Sequence[str]) -> None:
    """Every record takes part in every ball, so a NULL, NaN or ±inf anywhere is an input error."""
    conditions = []
    for q in quoted(columns):
        conditions += [f"{q} IS NULL", f"NOT system.main.isfinite({as_double(q)})"]
    counts = con.execute(count_where(relation_sql, conditions)).fetchall()[0]
    for idx, (c, q) in enumerate(zip(columns, quoted(columns))):
        nulls, nonfinite = counts[2 * idx], counts[2 * idx + 1]
        if nulls:
            raise UserError(
                f"column {c!r} has {nulls} NULL value(s); every record takes part in the ball counts",
                f"filter them out of the data, e.g. FROM ({select_from('*', relation_sql, where=f'{q} IS NOT NULL')})",
            )
        if nonfinite:
            raise UserError(
                f"column {c!r} has {nonfinite} NaN or infinite value(s); distances to them are undefined",
                f"filter them out of the data, e.g. FROM ({select_from('*', relation_sql, where=f'isfinite({q})')})",
            )


def load_points(
    con: duckdb.DuckDBPyConnection, relation_sql: str, columns: Sequence[str], selector_sql: str | None
) -> PointData:
    """Read every row's values on `columns` and which rows the trusted `selector_sql` picks.

    One scan returns both, so the selection and the data cannot disagree on row order. A
    selector that evaluates to NULL does not select the row. Zero selected rows is an error.
    """
    cols = check_columns(con, relation_sql, columns)
    check_finite(con, relation_sql, cols)
    values_sql = [aliased(as_double(q), f"__pcor_v{j}") for j, q in enumerate(quoted(cols))]
    # The newline keeps a trailing "-- comment" in the selector from swallowing the rest.
    selector = "TRUE" if selector_sql is None else f"coalesce(CAST(({selector_sql}\n) AS BOOLEAN), FALSE)"
    # The whole row comes along so each answer names its record (e.g. by id), from the same scan.
    sql = select_from([*values_sql, aliased(selector, "__pcor_sel"), "*"], relation_sql)
    try:
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error as err:
        raise UserError(
            f"the record selector {selector_sql!r} is not a valid condition on {relation_sql}: {_first_line(err)}",
            "write a SQL boolean expression over the relation's columns",
        ) from None
    n = table.num_rows
    values = np.empty((n, len(cols)), dtype=np.float64)
    for j in range(len(cols)):
        values[:, j] = table.column(f"__pcor_v{j}").to_numpy()
    values += 0.0  # −0.0 + 0.0 = +0.0: equal values must also be equal bit patterns for np.unique
    if not np.all(np.isfinite(values)):
        raise InternalError("non-finite values passed the NULL/NaN check")
    sel = table.column("__pcor_sel").to_numpy(zero_copy_only=False).astype(bool)
    selected = np.flatnonzero(sel)
    if selected.size == 0:
        where = "the relation is empty" if n == 0 else f"the record selector {selector_sql!r} matches no rows"
        raise UserError(where, "select at least one record (check the WHERE clause and the relation)")
    row_columns = list(range(len(cols) + 1, table.num_columns))
    picked = table.select(row_columns).filter(pa.array(sel))
    return PointData(cols, values, selected, _rows_as_dicts(picked))


def load_values(con: duckdb.DuckDBPyConnection, relation_sql: str, columns: Sequence[str]) -> np.ndarray:
    """Every row's values on `columns` (N × d float64, −0.0 as 0.0), checked as by
    `load_points`, with no record selected: the data a point of the metric space is counted
    against (`IDENTIFY ANOMALY VALUE`). No row leaves as a record."""
    cols = check_columns(con, relation_sql, columns)
    check_finite(con, relation_sql, cols)
    table = con.sql(select_from([aliased(as_double(q), f"__pcor_v{j}") for j, q in enumerate(quoted(cols))],
                                relation_sql)).to_arrow_table()
    values = np.empty((table.num_rows, len(cols)), dtype=np.float64)
    for j in range(len(cols)):
        values[:, j] = table.column(j).to_numpy()
    return values + 0.0


def point_ball_counts(values: np.ndarray, point: Sequence[float], radius: float, norm: str = "l2") -> BallCounts:
    """x_i and B_x(i, r) of one point i of the metric space — in the data or not (then x_i = 0)
    — against every row of `values`: the same counting as for records (`ball_counts`)."""
    return ball_counts(values, np.asarray([list(point)], dtype=np.float64), radius, norm)


def _column_as_list(column: pa.ChunkedArray) -> list[Any]:
    """Python values of one column, as `to_pylist` gives them, without its per-value overhead
    on the common types (ENUM dictionaries, null-free numbers and booleans): ~6x faster."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        combined = column.combine_chunks()
        labels = combined.dictionary.to_pylist()
        return [None if i is None else labels[i] for i in combined.indices.to_pylist()]
    if column.null_count == 0 and (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        return column.to_numpy().tolist()
    return column.to_pylist()


def _rows_as_dicts(table: pa.Table) -> tuple[dict[str, Any], ...]:
    names = table.column_names
    columns = [_column_as_list(c) for c in table.columns]
    return tuple(dict(zip(names, row)) for row in zip(*columns))


def relation_ball_counts(points: PointData, radius: float, norm: str = "l2") -> BallCounts:
    """x_i and B_x(i, r) for the selected records of `points`, against all of its records."""
    return ball_counts(points.values, points.values[points.selected], radius, norm)
