"""Ball counts B_x(i, r) and multiplicities x_i counted in Spark (DESIGN.md §3): a grid join.

The embedded engine brings every point into numpy (`pcor_sql.anomaly.balls`). Here the rows
stay in the cluster: the data is reduced to distinct points with weights, each distinct
selected point q is paired with the points of the grid cells next to its own, and the pairs
within r — by the reference distance, the same float expression in the same order — are
summed per q. Only (q, x_q, B_q) rows come back, one per distinct selected point.

Why no point within r is missed. Cells have side s = r + 2m on the first g = min(d, 4)
columns, with m = 1e-12·(r + scale) + 1e-150 (scale: the largest |value|), as in
`pcor_sql.anomaly.strips`. A pair the reference counts has a computed distance ≤ r, so every
per-column difference is at most r plus a few ulps of scale, below s − m. Two values closer
than s − m lie in the same or adjacent cells even after floor(x / s) rounds (a misplaced value
sits within a few ulps of an edge, and m dwarfs that), so q's 3^g neighbouring cells hold
every point of its ball; the exact test then decides each pair. Cost: about Q·3^g cell
look-ups and the pairs in those cells (a (3s)^g box around each query).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from pcor_sql.anomaly.balls import BallCounts
from pcor_sql.anomaly.points import require_numeric, selected_columns
from pcor_sql.backends.base import Records
from pcor_sql.errors import InternalError, UserError
from pcor_sql.sqltext.build import aliased, as_double, double_literal, quoted, select_from
from pcor_sql.sqltext.dialect import spark_sql

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL")
_GRID_COLUMNS = 4
_FIX = "check the relation and the column names"


def spark_ball_counts(access: Any, relation_sql: str, columns: Sequence[str], selector_sql: str | None, radius: float,
                      norm: str) -> tuple[Records, BallCounts]:
    cols = _check_columns(access, relation_sql, columns)
    n_rows, scale = _check_finite(access, relation_sql, cols)
    values = [aliased(f"{as_double(q)} + 0.0", f"__pcor_v{j}") for j, q in enumerate(quoted(cols))]
    # The newline keeps a trailing "-- comment" in the selector from swallowing the rest.
    selector = "TRUE" if selector_sql is None else f"coalesce(CAST(({selector_sql}\n) AS BOOLEAN), FALSE)"
    fix = "write a SQL boolean expression over the relation's columns"
    picked = access.arrow(select_from([*values, "*"], relation_sql, where=selector), fix=fix)
    if picked.num_rows == 0:
        where = "the relation is empty" if n_rows == 0 else f"the record selector {selector_sql!r} matches no rows"
        raise UserError(where, "select at least one record (check the WHERE clause and the relation)")
    d = len(cols)
    points = np.column_stack([picked.column(j).to_numpy() for j in range(d)]) + 0.0
    rest = picked.select(list(range(d, picked.num_columns)))
    records = tuple(dict(zip(rest.column_names, row)) for row in zip(*(c.to_pylist() for c in rest.columns)))
    counted = access.arrow(_counts_sql(relation_sql, d, values, selector, radius, norm, scale), fix=fix)
    found = {tuple(row[:d]): (row[d], row[d + 1]) for row in zip(*(c.to_pylist() for c in counted.columns))}
    try:
        mult, ball = zip(*(found[tuple(p)] for p in points.tolist()))
    except KeyError:
        raise InternalError("a selected point is missing from the engine's ball counts") from None
    return records, BallCounts(np.asarray(mult, dtype=np.int64), np.asarray(ball, dtype=np.int64))


def spark_point_counts(access: Any, relation_sql: str, columns: Sequence[str], point: Sequence[float], radius: float,
                       norm: str) -> BallCounts:
    """x_i and B_x(i, r) of one point of the metric space, counted in one aggregate over the
    rows: the reference distance (`_distance`) from the point to each row, only two numbers back."""
    cols = _check_columns(access, relation_sql, columns)
    _check_finite(access, relation_sql, cols)
    if len(point) != len(cols):
        raise InternalError("a point needs one value per column")
    v = [f"__pcor_v{j}" for j in range(len(cols))]
    rows = select_from([aliased(f"{as_double(q)} + 0.0", c) for q, c in zip(quoted(cols), v)], relation_sql)
    at = [double_literal(x) for x in point]
    same = " AND ".join(f"{c} = {x}" for c, x in zip(v, at))
    dist = _distance([f"abs({x} - {c})" for c, x in zip(v, at)], norm)
    counted = access.arrow(select_from([f"coalesce(sum(CASE WHEN {same} THEN 1 ELSE 0 END), 0)",
                                        f"coalesce(sum(CASE WHEN {dist} <= {double_literal(radius)} THEN 1 ELSE 0 END), 0)"],
                                       f"({rows})"), fix=_FIX)
    mult, ball = (int(c[0].as_py()) for c in counted.columns)
    return BallCounts(np.asarray([mult], dtype=np.int64), np.asarray([ball], dtype=np.int64))


def _distance(diffs: list[str], norm: str) -> str:
    """The reference distance (`pcor_sql.anomaly.balls`) over per-column |differences|, summed left to right."""
    if len(diffs) == 1:
        return diffs[0]
    if norm == "l1":
        return " + ".join(diffs)
    if norm == "l2":
        return "sqrt(" + " + ".join(f"{x} * {x}" for x in diffs) + ")"
    return "greatest(" + ", ".join(diffs) + ")"


def _counts_sql(relation_sql: str, d: int, values: list[str], selector: str, radius: float, norm: str,
                scale: float) -> str:
    margin = 1e-12 * (radius + scale) + 1e-150
    side = double_literal(radius + 2 * margin)
    r = double_literal(radius)
    g = min(d, _GRID_COLUMNS)
    v = [f"__pcor_v{j}" for j in range(d)]
    cells = [f"floor({v[j]} / {side}) AS __pcor_g{j}" for j in range(g)]
    pts = select_from([*values, aliased(selector, "__pcor_sel")], relation_sql)
    data = select_from([*v, "count(*) AS w", *cells], f"({pts})", group_by=", ".join(v))
    queries = select_from(["DISTINCT " + ", ".join(v), *cells], f"({pts})", where="__pcor_sel")
    offsets = " CROSS JOIN ".join(f"(SELECT explode(sequence(-1, 1)) AS __pcor_o{j})" for j in range(g))
    on = " AND ".join(f"p.__pcor_g{j} = q.__pcor_g{j} + __pcor_o{j}" for j in range(g))
    dist = _distance([f"abs(q.{c} - p.{c})" for c in v], norm)
    same = " AND ".join(f"p.{c} = q.{c}" for c in v)
    return select_from(
        [*(f"q.{c}" for c in v), f"sum(CASE WHEN {same} THEN p.w ELSE 0 END) AS mult",
         f"sum(CASE WHEN {dist} <= {r} THEN p.w ELSE 0 END) AS ball"],
        f"({queries}) AS q CROSS JOIN {offsets} JOIN ({data}) AS p ON {on}",
        group_by=", ".join(f"q.{c}" for c in v),
    )


def _check_columns(access: Any, relation_sql: str, columns: Sequence[str]) -> tuple[str, ...]:
    cols = selected_columns(columns)
    try:
        fields = access._fields(select_from(quoted(cols), relation_sql), _FIX)
    except UserError as exc:
        raise UserError(f"cannot read columns {', '.join(cols)} from {relation_sql}: {exc.problem}", _FIX) from None
    return require_numeric(cols, [type_name for _, type_name, _nn in fields],
                           lambda type_name: type_name.split("(")[0] in _NUMERIC)


def _check_finite(access: Any, relation_sql: str, columns: Sequence[str]) -> tuple[int, float]:
    """Every record takes part in every ball, so a NULL, NaN or ±inf anywhere is an input error.
    Returns the row count and the largest |value| (the grid's rounding margin scales with it)."""
    inf = double_literal(math.inf)
    items = ["count(*)"]
    for q in quoted(columns):
        x = as_double(q)
        items += [f"count_if({q} IS NULL)", f"count_if(isnan({x}) OR abs({x}) = {inf})",
                  f"max(CASE WHEN isnan({x}) OR abs({x}) = {inf} THEN 0.0 ELSE abs({x}) END)"]
    row = [c[0].as_py() for c in access.arrow(select_from(items, relation_sql), fix=_FIX).columns]
    for idx, (c, q) in enumerate(zip(columns, quoted(columns))):
        nulls, nonfinite = row[1 + 3 * idx], row[2 + 3 * idx]
        if nulls:
            raise UserError(
                f"column {c!r} has {nulls} NULL value(s); every record takes part in the ball counts",
                f"filter them out of the data, e.g. FROM ({spark_sql(select_from('*', relation_sql, where=f'{q} IS NOT NULL'))})",
            )
        if nonfinite:
            raise UserError(
                f"column {c!r} has {nonfinite} NaN or infinite value(s); distances to them are undefined",
                f"filter them out of the data, e.g. FROM ({spark_sql(select_from('*', relation_sql, where=f'NOT isnan({q})'))})",
            )
    scale = max((float(row[3 + 3 * i] or 0.0) for i in range(len(columns))), default=0.0)
    return int(row[0]), scale

