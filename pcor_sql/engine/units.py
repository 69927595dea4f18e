"""Privacy units: the base tables, files and registered objects a query reads (DESIGN.md §6).

The ledger charges a release to every unit any part of its statement reads — the relation, the
metric expression, the record selector, subqueries, views, CTEs, table functions — so
`resolve_units` takes a whole SELECT statement (`SELECT {metric} FROM {relation} WHERE
{selector}`), or a relation alone (`t`, `'x.parquet'`, `(SELECT ...)`, read as `SELECT * FROM
<relation>`). The unit never depends on how the data is spelled: `t`, `main.t`, `t AS s`, a view
over t, a CTE, `USE other` then `memory.t`, a subquery in the select list all name one unit, a
join names both, and `unit_names` says how a unit is named by what the data is.

Two views of the query, cross-checked:
- **the plan** (`plan_reads`): the unoptimised logical plan names every table read, exactly,
  with views and macros expanded and subqueries planned; it counts file and object reads but
  does not name them;
- **the walk** (`statement_walk`): the parsed statement, and through it the views it reaches,
  names the files (`FROM 'x.parquet'`, `read_parquet([...])`) and registered objects. Where it
  cannot tell what a name binds to (`name_lookup`: a view shadowed by a view) it refuses.
Macros are expanded by the binder behind the walk's back, so one whose body reads anything is
refused (`user_functions`). Then the plan's count of file reads and of object reads must equal
the walk's: a read neither names (a Python variable found by a replacement scan) or one the
binder drops (`typeof((SELECT ...))`) refuses the query. Data-free sources (range, unnest,
VALUES) are no unit; anything else the plan reads (duckdb_tables(), sqlite_scan) is refused.

Never reads rows: the binder, the catalog and the file system decide everything (binding a CSV
or JSON reader makes DuckDB sniff the file's head for its schema, but nothing read changes the
result). The catalog is read afresh for every request, so a view redefined since charges its new
tables.

Cost, in catalog statements: one for the parse (of both readings of the text), the settings and
the catalog's names (and the views' SQL); when a caller keeps a memo and the query reads base
tables only, nothing more while that first statement reads the same (see `resolve_units`);
else a plain EXPLAIN under the caller's settings, then the JSON EXPLAIN between
a SET and its restore — five in all for a table, 5 to 25 ms on a loaded 2-core machine; once
views are reached, one statement for their SQL and one parse per level of nesting; one glob()
for all file paths; the default database's name and file when a table of a DuckDB file is read
(once per access, on a fresh cursor); one listing of the macros, only when a query calls a name
that is no built-in or a file read hangs on a function call (30 to 70 ms more: DuckDB renders
every built-in; see `user_functions`).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable

import duckdb

from pcor_sql.engine.datasets import BUNDLED
from pcor_sql.engine.name_lookup import Catalog, looks_like_path
from pcor_sql.engine.plan_reads import FIX, bind_error, describe_query, plan_leaves
from pcor_sql.engine.statement_walk import Walk, one_select
from pcor_sql.engine.unit_files import file_units
from pcor_sql.engine.unit_names import DatabaseNames, Home, Unit, canonical_name, home_database, split_qualified
from pcor_sql.engine.user_functions import needs_listing, refuse_reading_macros
from pcor_sql.errors import UserError

__all__ = ["Home", "Unit", "canonical_name", "home_database", "resolve_spelling", "resolve_units", "split_qualified"]

# Every function the engine's own catalog queries call is qualified with `system.main.`: a user
# macro may take any name (`json_serialize_sql`, `list`, even `row`, which `(a, b)` calls), and
# an unqualified call would run it (see `user_functions`).
_CATALOG_SQL = """
SELECT system.main.json_serialize_sql($1), system.main.json_serialize_sql($2),
       system.main.current_setting('explain_output'),
       (SELECT system.main.list(system.main.row(database_name, schema_name, table_name, comment))
        FROM system.main.duckdb_tables()),
       (SELECT system.main.list(system.main.row(database_name, schema_name, view_name, sql))
        FROM system.main.duckdb_views() WHERE NOT internal),
       (SELECT system.main.list(system.main.row(database_name, path, type)) FROM system.main.duckdb_databases()),
       system.main.current_database(), system.main.current_schema(), system.main.current_setting('search_path')"""

#: How many resolutions one access remembers (`resolve_units(memo=...)`).
MEMO_SIZE = 256


HomeOf = Callable[[], Home]


def resolve_units(con: duckdb.DuckDBPyConnection, sql: str, *, home: HomeOf | None = None,
                  memo: dict[tuple[str, str], tuple[Unit, ...]] | None = None) -> tuple[Unit, ...]:
    """The units `sql` reads on `con`: sorted, unique, non-empty. `sql` is one SELECT statement
    or a relation (what `SELECT * FROM <relation>` reads). `home` returns `home_database(con)`
    (a caller may keep it: a connection's default database never changes); it is called only when
    a table of a DuckDB file is read. A query that does not bind (unknown table, syntax), reads
    something that is no table, file or registered object, or cannot be attributed exactly is a
    one-line UserError.

    `memo` (kept by the caller, one per connection): the first statement, which every call runs,
    reads every table, view (with its SQL), database, the current database and schema and the
    search path; a query that reads base tables only and looks no function up resolves to the
    same units for as long as all of that and its text are the same, so its answer is kept under
    them and the remaining statements are skipped. A query that reads files (a glob may match
    new ones), registered objects or calls a function by name (a macro may be redefined) is
    resolved afresh every time."""
    if not isinstance(sql, str) or not sql.strip():
        raise UserError("the relation is empty", "name a table, a view, a file or a subquery")
    wrapped = f"SELECT * FROM {sql}"
    try:
        row = con.execute(_CATALOG_SQL, [sql, wrapped]).fetchall()[0]
    except duckdb.Error as exc:
        raise bind_error(describe_query(sql, False), exc) from None
    as_statement, as_relation, explain_output, tables, views_sql, databases = row[:6]
    seen = (sql, repr(row[3:]))  # the catalog (views with their SQL), the current database and schema, the search path
    views = [tuple(v)[:3] for v in views_sql or []]
    if memo is not None and seen in memo:
        return memo[seen]
    parsed = json.loads(as_statement)
    statement = None if parsed.get("error") else one_select(parsed, describe_query(sql, True))
    label = describe_query(sql, statement is not None)
    node = statement if statement is not None else one_select(json.loads(as_relation), label)
    query = sql if statement is not None else wrapped
    leaves = plan_leaves(con, query, explain_output, label)
    catalog = Catalog(tables or [], views or [])
    walk = Walk(con, catalog, label)
    walk.query(node, context=None, depth=0)
    walk.finish()
    if walk.lookups and needs_listing(walk.called, walk.fragile):
        refuse_reading_macros(con, walk.called, label)

    reads = Counter(kind for kind, _ in leaves)
    for kind in ("file", "object"):
        if reads[kind] > walk.counts[kind]:
            raise UserError(
                f"{label} reads {reads[kind] - walk.counts[kind]} {kind} source(s) that cannot be attributed "
                "(through a macro, or a replacement scan of a Python variable)", FIX)
        if reads[kind] < walk.counts[kind]:
            raise UserError(
                f"{label} names {walk.counts[kind] - reads[kind]} {kind} read(s) that DuckDB's plan drops "
                "(an argument a function ignores, as in typeof((SELECT ...))), so its reads cannot be attributed exactly",
                "remove the reads the query does not use")
    names = DatabaseNames(databases or [], home or _home_of(con))
    units = {names.table_unit(catalog.spelled(parts), catalog.comment(parts)) for kind, parts in leaves if kind == "table"}
    units |= walk.units
    if walk.paths:
        units.update(file_units(con, walk.paths))
    if not units:
        raise UserError(f"{label} reads no table or file", "name a table, a view or a file")
    found = tuple(sorted(units))
    if memo is not None and not (walk.lookups or walk.paths or walk.units or reads["file"] or reads["object"]):
        while len(memo) >= MEMO_SIZE:
            memo.pop(next(iter(memo)))
        memo[seen] = found
    return found


def _home_of(con: duckdb.DuckDBPyConnection) -> HomeOf:
    """`home_database(con)`, read on the first call only."""
    found: list[Home] = []

    def home() -> Home:
        if not found:
            found.append(home_database(con))
        return found[0]

    return home


def resolve_spelling(con: duckdb.DuckDBPyConnection, spelling: str, *, home: HomeOf | None = None) -> tuple[Unit, ...]:
    """The units a hand-typed name denotes (for `budget set-limit UNIT`): a table or view
    ('wages', 'main.wages', 'memory.main.wages', any relation or SELECT), a file path quoted or
    not, relative or absolute, a `file:` URI, globs allowed ('data/w*.parquet'), or a unit name
    ('file:/abs/x.parquet', 'bundled:salaries', 'object:temp.main.df', 'memory.main.wages', and
    'main.wages' for a table of the ledger's own database file)."""
    text = spelling.strip() if isinstance(spelling, str) else ""
    if not text:
        raise UserError("the unit is empty", "name a table, a view, a file or a unit such as bundled:salaries")
    if text.startswith("file:"):
        return file_units(con, [text])
    if text.startswith("bundled:"):
        name = text[len("bundled:"):]
        if name not in BUNDLED:
            raise UserError(f"unknown bundled dataset {name!r}", f"use one of: {', '.join(BUNDLED)}")
        return (Unit(text, "bundled"),)
    if text.startswith("object:"):
        units = resolve_units(con, text[len("object:"):], home=home)
        if units != (Unit(text, "object"),):
            raise UserError(f"{text} is not a registered object", "register it with con.register(name, table)")
        return units
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return file_units(con, [text[1:-1].replace("''", "'")])
    unquoted = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    if looks_like_path(unquoted):
        return file_units(con, [unquoted])
    home = home or _home_of(con)
    parts = split_qualified(text) if not any(c in text for c in " ()'") else ()
    if len(parts) == 2 and home().identity is not None:
        # A unit name of the ledger's own database: `schema.table`, qualified with the catalog
        # the file is open under, so neither a temp table nor a USE can change what it means.
        try:
            units = resolve_units(con, canonical_name((home().database, *parts)), home=home)
        except UserError:
            units = ()
        if units == (Unit(canonical_name(parts), "table"),):
            return units
    return resolve_units(con, text, home=home)
