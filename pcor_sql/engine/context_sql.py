"""Contexts written as SQL: conjunction-of-disjunction WHERE clauses over the declared domains
(SQL text only — the compiled validity checks are numba's, in `compiled_checks`).

An attribute whose whole domain is selected constrains nothing but NULLs, and rows with a
NULL attribute are in no population. So in the released form it is omitted when the catalog
declares the column NOT NULL, and otherwise becomes `IS NOT NULL` — decided by the schema,
never by whether the data happens to hold a NULL (that would make the released text depend
on one row).
Declared values outside an ENUM type cannot be compared with the ENUM column directly
(DuckDB would fail to cast them), so such columns are compared as VARCHAR.
An ordinal attribute (declared bins) is released as one range over its column, the run of
bins its context keeps (`range_predicate`); a full run is treated as a full domain.
"""

from __future__ import annotations

from typing import Any, Sequence

from pcor_sql.core.bins import is_infinite
from pcor_sql.core.space import Attribute, ContextSpace
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal


def column_sql(attr: Attribute, cast_varchar: frozenset[str]) -> str:
    col = quote_identifier(attr.name)
    return f"CAST({col} AS VARCHAR)" if attr.name in cast_varchar else col


def attribute_predicate(col_sql: str, values: Sequence[Any], full: bool) -> str:
    if full:
        return f"{col_sql} IS NOT NULL"
    if len(values) == 1:
        return f"{col_sql} = {_literal(values[0])}"
    return f"{col_sql} IN ({', '.join(_literal(v) for v in values)})"


# Domain values recur in every context: quote each once (keyed by type too: 1, 1.0 and True
# are equal as keys but quote differently). Rendering all of a large COE as JSON spends most
# of its time here otherwise.
_QUOTED: dict[tuple[type, Any], str] = {}
_QUOTED_MAX = 100_000


def _literal(value: Any) -> str:
    try:
        key = (type(value), value)
        quoted = _QUOTED.get(key)
    except TypeError:  # an unhashable value: quote it every time
        return quote_literal(value)
    if quoted is None:
        quoted = quote_literal(value)
        if len(_QUOTED) < _QUOTED_MAX:
            _QUOTED[key] = quoted
    return quoted


def range_predicate(col_sql: str, attr: Attribute, first: int, last: int) -> str:
    """Bins first..last of an ordinal attribute as a range over its column: `c >= lo AND c < hi`,
    `c <= hi` when the run ends with the last bin (closed), an infinite edge's side omitted."""
    lo, hi = attr.edges[first], attr.edges[last + 1]
    parts = []
    if not is_infinite(lo):
        parts.append(f"{col_sql} >= {_literal(lo)}")
    if not is_infinite(hi):
        parts.append(f"{col_sql} {'<=' if last == len(attr.domain) - 1 else '<'} {_literal(hi)}")
    return " AND ".join(parts) if parts else f"{col_sql} IS NOT NULL"


def context_predicate(
    space: ContextSpace,
    mask: int,
    *,
    cast_varchar: frozenset[str] = frozenset(),
    omit_full: bool = True,
    not_null: frozenset[str] = frozenset(),
    ranges: bool | None = None,
) -> str:
    """The WHERE predicate selecting exactly population D_C of context `mask`.

    With `omit_full` (the released form) a fully selected attribute whose column is declared
    NOT NULL (`not_null`) is left out, and a context left with no condition compiles to TRUE;
    otherwise a fully selected attribute becomes `IS NOT NULL`.

    An ordinal attribute's run of bins is written as a range over its raw column when `ranges`
    (`age >= 25 AND age < 45`: the released form, over the request's relation), else as its
    bin labels (`age IN ('[25, 35)', '[35, 45)')`: the form over `Schema.relation_sql`, where
    the column holds its bin's label). `ranges` defaults to `omit_full`: the released form.
    """
    ranges = omit_full if ranges is None else ranges
    parts = []
    for i, attr in enumerate(space.attributes):
        full = space.is_full(mask, i)
        if full and omit_full and attr.name in not_null:
            continue
        if attr.ordinal and ranges and not full:
            parts.append(range_predicate(column_sql(attr, cast_varchar), attr, *space.run(mask, i)))
            continue
        values = [attr.domain[j] for j in space.selected_indices(mask, i)]
        parts.append(attribute_predicate(column_sql(attr, cast_varchar), values, full))
    return " AND ".join(parts) if parts else "TRUE"
