"""Named builders for the SQL text the engine and the frontend run.

Each builder takes SQL fragments that are already compiled (a relation after FROM, a metric
expression, a WHERE predicate) and names of columns, which it quotes itself. Values never
pass through here: callers bind them as parameters or render them with `quote_literal`.
The text is kept exactly as the call sites wrote it before, since golden fixtures and
seeded outputs record some of it. Every builder is `type_exact`: a str or int subclass passed
in is written as its own data, whatever its `__str__`, `__format__` or `replace` say.

Built-in functions are called as `system.main.<name>(...)`: a macro the owner's database holds
(`CREATE MACRO count(x) AS 0`) takes precedence over a built-in of the same name, operators
included, and would change populations and verdicts. Spark gets the text without the qualifier
(`dialect.spark_sql`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pcor_sql.errors import InternalError
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal, type_exact

# The metric, cast to DOUBLE, is read back under this column name.
METRIC_ALIAS = "m"


@type_exact
def select_from(
    items: str | Sequence[str],
    relation_sql: str,
    *,
    where: str | None = None,
    group_by: str | None = None,
    order_by: str | None = None,
    limit: int | None = None,
) -> str:
    """`SELECT <items> FROM <relation> [WHERE ..] [GROUP BY ..] [ORDER BY ..] [LIMIT ..]`.

    `items` is one compiled select list or a sequence of select items (joined by commas)."""
    select_list = items if isinstance(items, str) else ", ".join(items)
    if not select_list.strip():
        raise InternalError("a SELECT needs at least one item")
    text = f"SELECT {select_list} FROM {relation_sql}"
    if where is not None:
        text += f" WHERE {where}"
    if group_by is not None:
        text += f" GROUP BY {group_by}"
    if order_by is not None:
        text += f" ORDER BY {order_by}"
    if limit is not None:
        text += f" LIMIT {int(limit)}"
    return text


@type_exact
def over_context(select_list: str, relation_sql: str, predicate_sql: str | None) -> str:
    """`SELECT <select list> FROM <relation> WHERE <context predicate>`: the metric over a
    context D_C — the released explanation's query, and a population's. An empty predicate
    (every value of every attribute) is the whole relation: WHERE TRUE."""
    return select_from(select_list, relation_sql, where=(predicate_sql or "").strip() or "TRUE")


@type_exact
def describe(select_sql: str) -> str:
    """`DESCRIBE <query>`: the result's column names and types, without running it."""
    return f"DESCRIBE {select_sql}"


@type_exact
def aliased(expr_sql: str, alias: str) -> str:
    """A select item `<expr> AS "<alias>"`."""
    return f"{expr_sql} AS {quote_identifier(alias)}"


@type_exact
def as_double(expr_sql: str) -> str:
    """`CAST(<expr> AS DOUBLE)`: metrics and distances are read as float64."""
    return f"CAST({expr_sql} AS DOUBLE)"


@type_exact
def as_number(expr_sql: str, type_name: str) -> str:
    """`<expr>` of DuckDB type `type_name` as a number DuckDB computes (for a hint to write in
    place of a metric that is not one): a date as days since 1970-01-01, a timestamp or a time
    of day as seconds (`epoch`), an interval as its seconds, a boolean as 0/1, else a CAST to
    DOUBLE (text holding numbers). `CAST(d AS DOUBLE)` of a date or an interval is refused."""
    kind = type_name.upper().split("(")[0].strip()
    if kind == "DATE":
        return f"date_diff('day', DATE '1970-01-01', {expr_sql})"
    if kind.startswith(("TIMESTAMP", "TIME", "INTERVAL")):
        return f"epoch({expr_sql})"
    if kind == "BOOLEAN":
        return f"CAST({expr_sql} AS INTEGER)"
    return as_double(expr_sql)


@type_exact
def quoted(names: Sequence[str]) -> list[str]:
    """The quoted identifiers of `names`, in order."""
    return [quote_identifier(n) for n in names]


@type_exact
def all_not_null(names: Sequence[str]) -> str:
    """`"a" IS NOT NULL AND "b" IS NOT NULL ...`: rows with a value in every named column."""
    return " AND ".join(f"{c} IS NOT NULL" for c in quoted(names))


@type_exact
def parquet_file(path: str | Path) -> str:
    """`read_parquet('<path>')`: a Parquet file as a relation."""
    return f"read_parquet({quote_literal(str(path))})"


@type_exact
def metric_values(metric_sql: str, relation_sql: str, where: str) -> str:
    """`SELECT CAST(<metric> AS DOUBLE) AS m FROM <relation> WHERE <where>`: one population."""
    return select_from(f"{as_double(metric_sql)} AS {METRIC_ALIAS}", relation_sql, where=where)


@type_exact
def distinct_values(relation_sql: str, name: str) -> str:
    """The distinct non-NULL values of column `name`, ascending."""
    col = quote_identifier(name)
    return select_from(f"DISTINCT {col}", relation_sql, where=f"{col} IS NOT NULL", order_by=col)


def distinct_values_of(relation_sql: str, names: Sequence[str]) -> str:
    """One row, one scan: the relation's row count, then for each column of `names` its
    distinct non-NULL values, ascending, as a list (NULL when it has none) — what
    `distinct_values` gives column by column."""
    items = ["system.main.count(*)"]
    for name in names:
        col = quote_identifier(name)
        items.append(f"system.main.list(DISTINCT {col} ORDER BY {col}) FILTER (WHERE {col} IS NOT NULL)")
    return select_from(items, relation_sql)


@type_exact
def count_where(relation_sql: str, conditions: Sequence[str]) -> str:
    """One row: for each condition, how many rows satisfy it (one scan for all of them)."""
    return select_from([f"system.main.count(*) FILTER (WHERE {c})" for c in conditions], relation_sql)


@type_exact
def group_by_cells(names: Sequence[str], metric_sql: str, relation_sql: str) -> str:
    """Per cell (combination of the named columns' values): its row count, how many of its metric
    values are NULL, NaN or infinite (`bad`), and the metric's mean, population variance,
    minimum and maximum."""
    col_list = ", ".join(quoted(names))
    m = METRIC_ALIAS
    inner = select_from(f"{col_list}, {as_double(metric_sql)} AS {m}", relation_sql)
    return select_from(
        f"{col_list}, system.main.count(*) AS n,"
        f" system.main.count(*) FILTER (WHERE {m} IS NULL OR system.main.isnan({m}) OR system.main.isinf({m})) AS bad,"
        f" system.main.avg({m}) AS mean, system.main.var_pop({m}) AS var, system.main.min({m}) AS lo,"
        f" system.main.max({m}) AS hi",
        f"({inner})",
        group_by="ALL",
    )


@type_exact
def cell_lists(names: Sequence[str], metric_sql: str, relation_sql: str) -> str:
    """Per cell (combination of the named columns' values): its metric values as DOUBLE, as one
    list in no particular order (column `vs`; NULLs included). The caller sorts each list and
    computes the moments from it: no aggregate but the list, so DuckDB only partitions rows."""
    col_list = ", ".join(quoted(names))
    inner = select_from(f"{col_list}, {as_double(metric_sql)} AS {METRIC_ALIAS}", relation_sql)
    return select_from(f"{col_list}, system.main.list({METRIC_ALIAS}) AS vs", f"({inner})", group_by="ALL")


@type_exact
def double_literal(value: float) -> str:
    """`CAST('<repr>' AS DOUBLE)`: a float64 exactly, in text both DuckDB and Spark read (a bare
    `1.5` is a DECIMAL in Spark)."""
    return f"CAST({quote_literal(repr(float(value)))} AS DOUBLE)"


@type_exact
def cell_windows(names: Sequence[str], metric_sql: str, relation_sql: str, v: float, depth: int,
                 cells_where: str | None = None) -> str:
    """Per cell, the `depth` distinct metric values nearest below `v`, those nearest above, and `v`
    itself, each with its row count `n` and its `side` (−1, 0, 1); `distinct_side` and `rows_side`
    count every distinct value and row on that side of the cell (so a window that stops short
    says so). Rows with a NULL attribute are in no cell; `cells_where` (a predicate on the named
    columns) keeps some cells only. The result is at most cells × (2·depth + 1) rows, whatever
    the table's size."""
    cols = ", ".join(quoted(names))
    m = METRIC_ALIAS
    vv = double_literal(v)
    where = all_not_null(names) + ("" if cells_where is None else f" AND {cells_where}")
    rows = select_from(f"{cols}, {as_double(metric_sql)} AS {m}", relation_sql, where=where)
    side = f"CASE WHEN {m} < {vv} THEN -1 WHEN {m} > {vv} THEN 1 ELSE 0 END"
    distinct = select_from(f"{cols}, {m}, system.main.count(*) AS n, {side} AS side", f"({rows})", group_by=f"{cols}, {m}")
    part = f"PARTITION BY {cols}, side"
    # Nearest to v first: descending below v, ascending above (side is constant in a partition;
    # no `side * m`, since `*` is a function a user macro could take the name of).
    nearest = f"CASE WHEN side < 0 THEN {m} END DESC NULLS LAST, {m}"
    ranked = select_from(
        f"{cols}, {m}, n, side, system.main.row_number() OVER ({part} ORDER BY {nearest}) AS r, "
        f"system.main.count(*) OVER ({part}) AS distinct_side, system.main.sum(n) OVER ({part}) AS rows_side",
        f"({distinct})",
    )
    return select_from(f"{cols}, {m}, n, side, distinct_side, rows_side", f"({ranked})", where=f"r <= {int(depth)}")


@type_exact
def cell_range_counts(names: Sequence[str], metric_sql: str, relation_sql: str, lo: float, hi: float,
                      right_closed: bool) -> str:
    """Per cell, how many rows have a metric in [lo, hi] (`right_closed`) or [lo, hi)."""
    cols = ", ".join(quoted(names))
    m = METRIC_ALIAS
    rows = select_from(f"{cols}, {as_double(metric_sql)} AS {m}", relation_sql, where=all_not_null(names))
    upper = "<=" if right_closed else "<"
    where = f"{m} >= {double_literal(lo)} AND {m} {upper} {double_literal(hi)}"
    return select_from(f"{cols}, system.main.count(*) AS n", f"({rows})", where=where, group_by=cols)
