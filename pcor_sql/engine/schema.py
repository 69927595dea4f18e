"""Context attributes and their declared domains, discovered from a DuckDB relation.

Domains come, in this order of preference, from an explicit declaration, from the column's
ENUM type, or — with a warning that names what leaks — from the values present in the data
(DESIGN.md §2: enumerating only present values reveals which values exist). A numeric column
with more than 16 distinct values, or any column with more than 64, is refused as a set of
labels: it needs declared bins (an ordinal attribute, `binned_relation`) or a domain.
"""

from __future__ import annotations

import decimal
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import duckdb

from pcor_sql.core.bins import Bins, check_edges, edge_text, is_infinite
from pcor_sql.core.space import Attribute
from pcor_sql.errors import UserError, option_hint, option_name, warn_privacy
from pcor_sql.sqltext.build import METRIC_ALIAS, aliased, as_number, describe, distinct_values_of, select_from
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
            f"select a numeric column, or a number made of it: SELECT {as_number(metric_sql, mtype)} ...",
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
    # Every data-derived domain from one scan (a query per attribute was a scan each).
    found = _data_domains(con, relation_sql, [n for n in names if n not in declared and n not in enum_cols]) \
        if distinct is None else {}
    for name in names:
        if isinstance(declared.get(name), Bins):
            edges = _bin_edges(con, relation_sql, name, columns[name], declared[name], warn, distinct)
            attributes.append(Attribute.binned(name, edges))
            continue
        if name in declared:
            values = _typed_values(con, declared[name], columns[name], name)
            if name in enum_cols and not set(values) <= set(enum_labels(columns[name])):
                cast_varchar.add(name)
        elif name in enum_cols:
            values = enum_labels(columns[name])
        else:
            values = found[name] if distinct is None else _present(distinct(name), name)
            _refuse_as_labels(name, columns[name], len(values))
            derived.append(name)
            if warn is not None:
                warn(
                    f"{name} has no declared domain: using the values present in the data, which reveals "
                    f"which {name} values exist; declare it (e.g. {_domain_hint(name, [str(v) for v in values[:4]], more=len(values) > 4)}) or use an ENUM column"
                )
        _refuse_wide_domain(name, len(values))
        attributes.append(Attribute(name, tuple(values)))
    if any(a.ordinal for a in attributes):
        relation_sql, metric_sql = binned_relation(relation_sql, metric_sql, attributes)
    return Schema(relation_sql, metric_sql, tuple(attributes), tuple(derived), frozenset(cast_varchar), not_null)


#: Most distinct values a column's data-derived domain may have: a numeric column, and any column.
MAX_NUMERIC_LABELS = 16
MAX_LABELS = 64
#: What the binned relation holds for a value outside its attribute's bins (never a bin label).
OUTSIDE_BINS = "outside the bins"
_BINNED_ALIAS = "__pcor_binned"


#: Most values a declared (or ENUM) domain may have. Memory and work follow the declared values,
#: not the rows: a context is a bitset of Σ|domain| bits, a BFS expansion or a start sweep asks up
#: to Σ|domain| neighbours, and a move's cell grid (`core.cell_moves`) grows with the values. At
#: 10,000 values a context is ≤ 1.25 KiB and an expansion ≤ 10,000 questions per attribute; past
#: that, values are better binned (an ordinal attribute is a run of bins: two ends, not a set).
MAX_DOMAIN_VALUES = 10_000


def _refuse_wide_domain(name: str, size: int) -> None:
    """A declared domain past MAX_DOMAIN_VALUES is refused while the schema is resolved (before
    any charge), saying what to do instead (DESIGN.md §5 "Errors")."""
    if size <= MAX_DOMAIN_VALUES:
        return
    raise UserError(
        f"the domain of {name!r} has {size:,} values, more than the {MAX_DOMAIN_VALUES:,} a context attribute may have",
        f"bin it if it is a number or a date ({option_hint('bins', f'{name}=auto:20', python=f'{{{name!r}: ' + repr('auto:20') + '}', sql=f'{quote_identifier(name)} BINS ' + repr('auto:20'))}), "
        f"group its values into fewer labels, or leave it out of {option_name('by')}",
    )


def _refuse_as_labels(name: str, type_name: str, distinct: int) -> None:
    """DESIGN.md §2: a numeric column with more than 16 distinct values, or any column with
    more than 64, is never silently a set of labels (a release would list values, not ranges,
    and a large domain makes the lattice explode). Raised while the schema is resolved, so
    before any charge."""
    numeric = is_numeric(type_name)
    if distinct <= (MAX_NUMERIC_LABELS if numeric else MAX_LABELS):
        return
    kind = "numeric column" if numeric else "column"
    bins = option_hint("bins", f"'{name}=e1,e2,e3,...'", python=f"{{{name!r}: [e1, e2, e3, ...]}}",
                       sql=f"{quote_identifier(name)} BINS (e1, e2, e3, ...)")
    auto = option_hint("bins", f"{name}=auto:5", python=f"{{{name!r}: 'auto:5'}}",
                       sql=f"{quote_identifier(name)} BINS 'auto:5'")
    raise UserError(
        f"{name} is a {kind} with {distinct:,} distinct values and no declared bins or domain: as a set of "
        f"labels a context would list values, not ranges",
        f"declare bins, e.g. {bins} (ranges [e1, e2), ..., the last closed; {auto} takes quantiles of the data, "
        f"with a privacy warning), or a domain if labels are really meant ({_domain_hint(name, ['a', 'b'], more=True)})",
    )


def binned_relation(relation_sql: str, metric_sql: str, attributes: Sequence[Attribute]) -> tuple[str, str]:
    """(relation, metric) through which the engine reads a schema with ordinal attributes:
    `(SELECT <metric> AS <metric text>, <attributes> FROM <relation>)`, where an ordinal
    attribute's column holds its bin's label (`OUTSIDE_BINS` outside the edges; NULL stays
    NULL). Everything that groups, windows or filters by attribute values then sees bins as
    labels, as for any declared domain; the metric is computed inside, so that qualified
    references (`s.salary` over `salaries s`) keep resolving. The released predicate is a range
    over the raw column of the request's own relation (`context_sql.context_predicate`)."""
    metric_alias = metric_sql  # the metric's column is named for its SQL, as messages show it
    plain = metric_sql[1:-1].replace('""', '"')
    if plain and quote_identifier(plain) == metric_sql:  # a quoted name: named for the name
        metric_alias = plain
    items = [aliased(metric_sql, metric_alias)]
    items += [_bin_case(a) if a.ordinal else quote_identifier(a.name) for a in attributes]
    return f"({select_from(items, relation_sql)}) AS {quote_identifier(_BINNED_ALIAS)}", quote_identifier(metric_alias)


def _bin_case(attr: Attribute) -> str:
    """`CASE ... END AS "<attr>"`: each row's bin label (see `binned_relation`)."""
    col = quote_identifier(attr.name)
    edges, labels = attr.edges, attr.domain
    outside = quote_literal(OUTSIDE_BINS)
    whens = [f"WHEN {col} IS NULL THEN NULL"]
    if any(isinstance(e, float) for e in edges):
        whens.append(f"WHEN system.main.isnan({col}) THEN {outside}")  # NaN compares above every number
    if not is_infinite(edges[0]):
        whens.append(f"WHEN {col} < {quote_literal(edges[0])} THEN {outside}")
    for j, label in enumerate(labels):
        hi = edges[j + 1]
        last = j == len(labels) - 1
        if last and is_infinite(hi):
            whens.append(f"ELSE {quote_literal(label)}")
            break
        whens.append(f"WHEN {col} {'<=' if last else '<'} {quote_literal(hi)} THEN {quote_literal(label)}")
    else:
        whens.append(f"ELSE {outside}")
    return f"CASE {' '.join(whens)} END AS {col}"


_DATE_TYPES = ("DATE", "TIMESTAMP")


def _bin_edges(
    con: duckdb.DuckDBPyConnection, relation_sql: str, name: str, type_name: str, bins: Bins, warn: Warn | None,
    distinct: Callable[[str], list[Any]] | None,
) -> tuple[Any, ...]:
    """The edges of `name`'s declared bins, in the column's terms: numbers for a numeric
    column, values of the column's type for a date or timestamp column (converted as declared
    values are); `auto:K` bins from the data's quantiles, with a PrivacyWarning."""
    numeric = is_numeric(type_name)
    temporal = type_name.upper().startswith(_DATE_TYPES)
    if not numeric and not temporal:
        raise UserError(
            f"bins are declared for {name}, which has type {type_name}, not a number or a date",
            f"declare a domain of labels for it instead ({_domain_hint(name, ['a', 'b'], more=True)})",
        )
    if bins.auto is not None:
        return _quantile_edges(con, relation_sql, name, bins.auto, warn, distinct)
    finite = [e for e in bins.edges if not is_infinite(e)]
    if numeric:
        bad = next((e for e in bins.edges if isinstance(e, bool) or not isinstance(e, (int, float, decimal.Decimal))), None)
        if bad is not None:
            raise UserError(f"the bin edge {bad!r} of {name} is not a number", f"declare numbers for the numeric column {name}")
        edges = tuple(bins.edges)
    else:
        if len(finite) != len(bins.edges):
            raise UserError(f"the bins of {name} have an infinite edge, which a {type_name} column cannot compare with",
                            "declare dates as the first and last edges")
        edges = tuple(_typed_values(con, [str(e) for e in bins.edges], type_name, name))
    check_edges(edges)
    return edges


def _quantile_edges(
    con: duckdb.DuckDBPyConnection, relation_sql: str, name: str, count: int, warn: Warn | None,
    distinct: Callable[[str], list[Any]] | None,
) -> tuple[Any, ...]:
    """`auto:K` edges: the data's 0, 1/K, …, 1 quantiles (values of the column; ties merged),
    only because the caller asked, and with a PrivacyWarning naming what they reveal."""
    if distinct is not None:
        raise UserError(f"auto bins for {name} are computed on DuckDB only", f"declare {name}'s edges instead")
    col = quote_identifier(name)
    points = ", ".join(repr(k / count) for k in range(count + 1))
    try:
        [(found,)] = con.execute(select_from(f"system.main.quantile_disc({col}, system.main.list_value({points}))", relation_sql,
                                             where=f"{col} IS NOT NULL")).fetchall()
    except duckdb.Error as exc:
        raise _user_sql_error(exc, f"check the column {name}") from None
    edges = tuple(dict.fromkeys(found or ()))  # ties in the data merge quantiles
    if len(edges) < 2:
        raise UserError(f"{name} has fewer than two distinct values, so it has no quantile bins",
                        f"declare {name}'s edges, or drop it from the attributes")
    shown = ",".join(edge_text(e) for e in edges)
    warn_privacy(  # always: without the caller's `warn`, as a PrivacyWarning
        f"{name} is binned by the data's quantiles (auto:{count}): the edges {shown} are values of the data — "
        f"its minimum, maximum and {count}-quantiles — and every release over {name} shows some of them; "
        f"declare edges chosen without looking at the data instead (e.g. "
        f"{option_hint('bins', f'{name}={shown}', python=f'{{{name!r}: [{shown}]}}', sql=f'{name} BINS ({shown})')})",
        warn,
    )
    return edges


def _domain_hint(name: str, values: Sequence[str], *, more: bool = False) -> str:
    """How the caller declares `name`'s domain: `--domain 'year=2019|2020'` on the command
    line, `domains={'year': [...]}` from Python, `DOMAIN (year IN (...))` in a statement."""
    tail = ", ..." if more else ""
    listed = "|".join([*(_compact_item(v, "'", "=|;'") for v in values), *(["..."] if more else [])])
    return option_hint(
        "domains", shlex.quote(_compact_item(name, '"', '=|;"') + "=" + listed),
        python=f"{{{name!r}: [{', '.join(repr(v) for v in values)}{tail}]}}",
        sql=f"{quote_identifier(name)} IN ({', '.join(quote_literal(v) for v in values)}{tail})",
    )


def _compact_item(text: str, quote: str, special: str) -> str:
    """An item of `--domain`'s compact form (`frontend.compact`), quoted with `quote` (the quote
    doubled inside) where it holds one of `special` or surrounding spaces: `"we""ird"` as a
    name, `'a|b'` as a value; else as it is."""
    if text and text == text.strip() and not set(text) & set(special):
        return text
    return quote + text.replace(quote, quote * 2) + quote


def _data_domains(con: duckdb.DuckDBPyConnection, relation_sql: str, names: list[str]) -> dict[str, list[Any]]:
    """Each column's distinct non-NULL values, ascending (`sqltext.build.distinct_values_of`)."""
    if not names:
        return {}
    rows, *lists = con.execute(distinct_values_of(relation_sql, names)).fetchall()[0]
    if not rows:
        # An empty table is the thing to fix, not a column's missing values.
        raise UserError("the table is empty: it has no rows to explain or derive a domain from",
                        "load data into it first, or query the table that holds it")
    return {name: _present(list(values or []), name) for name, values in zip(names, lists)}


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
        # Two unnests side by side pair up; no generate_subscripts, a built-in macro whose body
        # calls functions by name (a macro in the owner's database could take one of them).
        rows = con.execute(
            f"SELECT CAST(v AS {type_name}) FROM (SELECT unnest($1::VARCHAR[]) AS v, unnest($2::BIGINT[]) AS i) ORDER BY i",
            [[str(v) for v in vals], list(range(len(vals)))],
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
