"""Context attributes and their declared domains, discovered from a DuckDB relation.

Domains come, in this order of preference, from an explicit declaration, from the column's
ENUM type, or — with a warning that names what leaks — from the values present in the data
(DESIGN.md §2: enumerating only present values reveals which values exist).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import duckdb

from pcor_sql.core.space import Attribute
from pcor_sql.errors import UserError, option_hint, option_name
from pcor_sql.sqltext.build import METRIC_ALIAS, aliased, describe, distinct_values, select_from
from pcor_sql.sqltext.connection import relation_fix
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal, string_literals

NUMERIC_TYPES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL",
)

Warn = Callable[[str], None]


@dataclass(frozen=True)
class Schema:
    """What a release reads: the relation, the metric expression and the context attributes."""

    relation_sql: str
    metric_sql: str
    attributes: tuple[Attribute, ...]
    derived: tuple[str, ...] = ()
    cast_varchar: frozenset[str] = frozenset()  # ENUM columns declared with values outside the type
    not_null: frozenset[str] = frozenset()  # columns the catalog declares NOT NULL

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)


# The metric's column in the one DESCRIBE that types the relation and the metric together; it is
# read by position (last), so a relation column of the same name cannot be mistaken for it.
_METRIC_PROBE = "__pcor_metric_type"


Described = tuple[list[tuple[str, str, bool]], str]


def describe_with_metric(
    con: duckdb.DuckDBPyConnection, relation_sql: str, metric_sql: str, *, along: str | None = None
) -> tuple[Described, tuple | None]:
    """((column, type, declared NOT NULL) of `SELECT * FROM relation`, the metric's type), in one
    statement. If it fails, the two parts are described apart to name what is wrong.

    `along` is a one-row SELECT of catalog facts a caller needs too (the ledger's location):
    cross-joined into the same statement, its row comes back second (None if it had none)."""
    query = describe(select_from(["*", aliased(metric_sql, _METRIC_PROBE)], relation_sql))
    if along is not None:
        query = select_from("*", f"({query}) CROSS JOIN ({along})")
    try:
        rows = con.execute(query).fetchall()
    except duckdb.Error:
        return (_describe(con, relation_sql), metric_type(con, relation_sql, metric_sql)), None
    extra = tuple(rows[0][6:]) if along is not None and rows else None
    return ([(r[0], r[1], r[2] == "NO") for r in rows[:-1]], rows[-1][1]), extra


def _describe(con: duckdb.DuckDBPyConnection, relation_sql: str) -> list[tuple[str, str, bool]]:
    """(column, type, declared NOT NULL) of `SELECT * FROM relation`."""
    try:
        rows = con.execute(describe(select_from("*", relation_sql))).fetchall()
    except duckdb.Error as exc:
        raise _user_sql_error(exc, relation_fix(exc, "check the FROM clause names an existing table, view or file")) from None
    return [(r[0], r[1], r[2] == "NO") for r in rows]


def metric_type(con: duckdb.DuckDBPyConnection, relation_sql: str, metric_sql: str) -> str:
    try:
        rows = con.execute(describe(select_from(f"{metric_sql} AS {METRIC_ALIAS}", relation_sql))).fetchall()
    except duckdb.Error as exc:
        raise _user_sql_error(exc, "check the metric column name") from None
    return rows[0][1]


def enum_labels(type_text: str) -> list[str]:
    """The labels of an ENUM type as DuckDB renders it (`ENUM('a', 'b''c')`), in type order."""
    return string_literals(type_text)


def is_numeric(type_name: str) -> bool:
    return type_name.upper().split("(")[0] in NUMERIC_TYPES


def resolve_schema(
    con: duckdb.DuckDBPyConnection,
    relation_sql: str,
    metric_sql: str,
    *,
    by: Sequence[str] | None = None,
    domains: Mapping[str, Sequence[Any]] | None = None,
    warn: Warn | None = None,
    described: Described | None = None,
    distinct: Callable[[str], list[Any]] | None = None,
) -> Schema:
    """Resolve the attributes (default: ENUM and declared columns) and their domains.
    `described`: what `describe_with_metric` returned, if the caller read it already.
    `distinct(column)`: the column's distinct non-NULL values, ascending, where another engine
    holds the rows (then `con` only casts declared values to the column types)."""
    described, mtype = described or describe_with_metric(con, relation_sql, metric_sql)[0]
    columns = {name: type_name for name, type_name, _ in described}
    not_null = frozenset(name for name, _, nn in described if nn)
    if not is_numeric(mtype):
        raise UserError(
            f"the metric {metric_sql} has type {mtype}, not a number",
            f"select a numeric column, or cast it: SELECT CAST({metric_sql} AS DOUBLE) ...",
        )
    declared = dict(domains or {})
    for name in declared:
        if name not in columns:
            raise UserError(f"a domain is declared for {name!r}, which is not a column", f"columns are: {', '.join(columns)}")
    enum_cols = {c for c, t in columns.items() if t.upper().startswith("ENUM(")}
    if by is None:
        names = [c for c in columns if c in enum_cols or c in declared]
        if not names:
            raise UserError(
                "no context attributes: the relation has no ENUM columns and no declared domains",
                f"name them with {option_hint('by', 'a,b', sql='a, b')} or declare domains (e.g. {_domain_hint('job_title', ['Nurse', 'Professor'])})",
            )
    else:
        names = list(by)
        if not names:
            raise UserError("no context attributes given", f"name at least one with {option_hint('by', 'a,b', sql='a, b')}")
        if len(set(names)) != len(names):
            raise UserError("an attribute is named twice in BY", "name each attribute once")
        for name in names:
            if name not in columns:
                raise UserError(f"unknown column {name!r}", f"columns are: {', '.join(columns)}")
            if quote_identifier(name) == metric_sql or name == metric_sql:
                raise UserError(f"the metric {name!r} cannot also be a context attribute", f"name other columns in {option_name('by')}")
    attributes, derived, cast_varchar = [], [], set()
    for name in names:
        if name in declared:
            values = _typed_values(con, declared[name], columns[name], name)
            if name in enum_cols and not set(values) <= set(enum_labels(columns[name])):
                cast_varchar.add(name)
        elif name in enum_cols:
            values = enum_labels(columns[name])
        else:
            values = _data_domain(con, relation_sql, name) if distinct is None else _present(distinct(name), name)
            derived.append(name)
            if warn is not None:
                warn(
                    f"{name} has no declared domain: using the values present in the data, which reveals "
                    f"which {name} values exist; declare it (e.g. {_domain_hint(name, [str(v) for v in values[:4]], more=len(values) > 4)}) or use an ENUM column"
                )
        attributes.append(Attribute(name, tuple(values)))
    return Schema(relation_sql, metric_sql, tuple(attributes), tuple(derived), frozenset(cast_varchar), not_null)


def _domain_hint(name: str, values: Sequence[str], *, more: bool = False) -> str:
    """How the caller declares `name`'s domain: `--domain 'year=2019|2020'` on the command
    line, `domains={'year': [...]}` from Python, `DOMAIN (year IN (...))` in a statement."""
    tail = ", ..." if more else ""
    return option_hint(
        "domains", f"'{name}={'|'.join(values)}{'|...' if more else ''}'",
        python=f"{{{name!r}: [{', '.join(repr(v) for v in values)}{tail}]}}",
        sql=f"{quote_identifier(name)} IN ({', '.join(quote_literal(v) for v in values)}{tail})",
    )


def _data_domain(con: duckdb.DuckDBPyConnection, relation_sql: str, name: str) -> list[Any]:
    return _present([r[0] for r in con.execute(distinct_values(relation_sql, name)).fetchall()], name)


def _present(values: list[Any], name: str) -> list[Any]:
    if not values:
        raise UserError(f"{name} has no non-NULL value to derive a domain from", f"declare its domain: {_domain_hint(name, ['a', 'b'])}")
    return values


def _typed_values(con: duckdb.DuckDBPyConnection, values: Sequence[Any], type_name: str, name: str) -> list[Any]:
    """Declared values converted to the column's type (an ENUM column compares as VARCHAR)."""
    vals = list(values)
    if not vals:
        raise UserError(f"the declared domain of {name!r} is empty", "declare at least one value")
    if type_name.upper().startswith("ENUM(") or type_name.upper() == "VARCHAR":
        return [str(v) for v in vals]
    try:
        rows = con.execute(
            f"SELECT CAST(v AS {type_name}) FROM (SELECT unnest($1::VARCHAR[]) AS v, generate_subscripts($1::VARCHAR[], 1) AS i) ORDER BY i",
            [[str(v) for v in vals]],
        ).fetchall()
    except duckdb.Error as exc:
        raise UserError(
            f"a declared value of {name!r} is not a valid {type_name}: {str(exc).splitlines()[0]}",
            f"declare {name} values of type {type_name}",
        ) from None
    return [r[0] for r in rows]


def _user_sql_error(exc: duckdb.Error, fix: str) -> UserError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(first, fix)
