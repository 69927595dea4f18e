"""Contexts compiled to conjunction-of-disjunction WHERE clauses over the declared domains.

An attribute whose whole domain is selected constrains nothing but NULLs, and rows with a
NULL attribute are in no population. So in the released form it is omitted when the catalog
declares the column NOT NULL, and otherwise becomes `IS NOT NULL` — decided by the schema,
never by whether the data happens to hold a NULL (that would make the released text depend
on one row).
Declared values outside an ENUM type cannot be compared with the ENUM column directly
(DuckDB would fail to cast them), so such columns are compared as VARCHAR.
"""

from __future__ import annotations

from typing import Any, Sequence

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


def context_predicate(
    space: ContextSpace,
    mask: int,
    *,
    cast_varchar: frozenset[str] = frozenset(),
    omit_full: bool = True,
    not_null: frozenset[str] = frozenset(),
) -> str:
    """The WHERE predicate selecting exactly population D_C of context `mask`.

    With `omit_full` (the released form) a fully selected attribute whose column is declared
    NOT NULL (`not_null`) is left out, and a context left with no condition compiles to TRUE;
    otherwise a fully selected attribute becomes `IS NOT NULL`.
    """
    parts = []
    for i, attr in enumerate(space.attributes):
        full = space.is_full(mask, i)
        if full and omit_full and attr.name in not_null:
            continue
        values = [attr.domain[j] for j in space.selected_indices(mask, i)]
        parts.append(attribute_predicate(column_sql(attr, cast_varchar), values, full))
    return " AND ".join(parts) if parts else "TRUE"
