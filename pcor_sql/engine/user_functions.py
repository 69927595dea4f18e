"""Macros a query may call, and whether they read data: expanded or refused.

A scalar or table macro is expanded by DuckDB's binder, so what its body reads is in the plan
but named by no reference the statement walk sees: `CREATE MACRO sec(i) AS (SELECT s.pay FROM
'x.parquet' s WHERE s.id = i)` reads a file through `sec(id)`. Tables read that way would still
be named by the plan, but files and objects would not, and a count of file reads can be fooled
(another reference the binder drops makes up the number). So a macro whose body reads anything
— a table, a view, a file, a table function, or another macro that does — is refused when a
query calls it. A macro that reads nothing (`CREATE MACRO plus_one(x) AS x + 1`) is expanded
harmlessly and allowed.

A user macro may take any name, a built-in's included: `CREATE MACRO lower(x) AS (...)` makes
every `lower(...)` call it, and operators and struct or list access look functions up by name
too (`a + b`, `a LIKE b`, `s.field`, `l[1]`). Listing the macros costs 30 to 70 milliseconds
(DuckDB renders thousands of built-ins), so it is done only when it can matter:
- a query calls a name that is no built-in (read once per process from a fresh connection):
  it can only be a macro or an extension's function, and the listing decides;
- a file or object read hangs on a function call (an argument, a subquery in one, a file
  reader or the scan of a registered object): a macro of a built-in's name could drop it (or
  replace the reader) while reading another file, and the plan's count would still balance.
Otherwise every name called is a built-in's and no counted read hangs on a call, so whatever a
shadowing macro read would be in the plan and nowhere in the walk: a table it reads is named by
the plan and charged, a file or object makes the counts disagree and refuses the query.

Python functions (`con.create_function`) are not macros: they compute values and read no rows
through DuckDB, so they add nothing to a plan; what their own code reads is the owner's business.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterator

import duckdb

from pcor_sql.errors import UserError

# One scan of duckdb_functions(): the user's macros, their bodies parsed.
# Its own calls are qualified: a user macro named `lower` or `json_serialize_sql` would run.
_USER_MACROS_SQL = """
SELECT system.main.lower(function_name), function_type,
       CASE function_type WHEN 'macro' THEN system.main.json_serialize_sql(system.main.concat('SELECT ', macro_definition))
                          ELSE system.main.json_serialize_sql(macro_definition) END
FROM system.main.duckdb_functions() WHERE NOT internal"""

# Expression classes DuckDB binds without looking a function up by name.
SAFE_CLASSES = frozenset({
    "COLUMN_REF", "CONSTANT", "COMPARISON", "CONJUNCTION", "CAST", "CASE", "BETWEEN", "SUBQUERY",
    "PARAMETER", "POSITIONAL_REFERENCE", "STAR", "DEFAULT",
})
SAFE_OPERATORS = frozenset({
    "COMPARE_IN", "COMPARE_NOT_IN", "OPERATOR_NOT", "OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL", "OPERATOR_COALESCE",
})


def looks_up_functions(expr: dict[str, Any]) -> bool:
    """Whether binding this one expression node may look a function up by name."""
    cls = expr.get("class")
    if cls == "OPERATOR":
        return expr.get("type") not in SAFE_OPERATORS
    if cls == "COLUMN_REF":
        return len(expr.get("column_names") or ()) > 1  # `s.f` may be struct_extract(s, 'f')
    return cls not in SAFE_CLASSES


def called_names(expr: dict[str, Any]) -> str | None:
    """The name an expression node calls explicitly, lower-cased (functions, aggregates, windows)."""
    if expr.get("class") in ("FUNCTION", "WINDOW") and expr.get("function_name"):
        return str(expr["function_name"]).lower()
    return None


@functools.lru_cache(maxsize=1)
def builtin_names() -> frozenset[str]:
    """Every function name of a fresh DuckDB of this version, lower-cased, read once."""
    fresh = duckdb.connect()
    try:
        return frozenset(r[0] for r in fresh.execute("SELECT DISTINCT lower(function_name) FROM duckdb_functions()").fetchall())
    finally:
        fresh.close()


def needs_listing(called: set[str], fragile: bool) -> bool:
    """Whether the macros must be listed to attribute a query's reads (see the module docstring)."""
    return fragile or not called <= builtin_names()


def refuse_reading_macros(con: duckdb.DuckDBPyConnection, called: set[str], label: str) -> None:
    """Refuse `label` if it calls a macro that reads data, or if such a macro is named like a
    built-in (any expression that looks a function up might reach it). One statement."""
    try:
        rows = con.execute(_USER_MACROS_SQL).fetchall()
    except duckdb.Error as exc:
        raise UserError(f"cannot list the macros {label} may call: {str(exc).splitlines()[0]}",
                        "check the connection") from None
    reading: set[str] = set()
    callees: dict[str, set[str]] = {}
    for name, kind, doc in rows:
        parsed = json.loads(doc) if doc else {"error": True}
        statements = parsed.get("statements") or []
        if parsed.get("error") or len(statements) != 1 or kind not in ("macro", "table_macro"):
            reading.add(name)  # a body the parser cannot read is treated as reading
            continue
        body = statements[0]["node"]
        if any(_reads(node) for node in _dicts(body)):
            reading.add(name)
        callees.setdefault(name, set()).update(n for n in map(called_names, _dicts(body)) if n)
    grew = True
    while grew:  # a macro that calls a reading macro reads too
        grew = False
        for name, names in callees.items():
            if name not in reading and names & reading:
                reading.add(name)
                grew = True
    # Implicit calls (`a + b`, `s.field`) reach only the core's names, which a fresh DuckDB has;
    # a macro named like an extension's function is reached only by an explicit call (`hit`).
    shadowing = sorted(reading & builtin_names())
    if shadowing:
        raise UserError(
            f"the macro {shadowing[0]}() reads tables or files and is named like a built-in function, so any "
            f"expression of {label} may call it and the engine cannot attribute what it reads",
            f"drop or rename the macro (DROP MACRO {shadowing[0]})",
        )
    hit = sorted(called & reading)
    if hit:
        raise UserError(
            f"{label} calls the macro {hit[0]}(), which reads tables or files the engine cannot attribute",
            "join the table or file in FROM (or in a view) instead of reading it inside a macro",
        )


def _reads(node: dict[str, Any]) -> bool:
    return node.get("type") in ("BASE_TABLE", "TABLE_FUNCTION")


def _dicts(obj: Any) -> Iterator[dict[str, Any]]:
    if isinstance(obj, list):
        for item in obj:
            yield from _dicts(item)
    elif isinstance(obj, dict):
        yield obj
        for value in obj.values():
            yield from _dicts(value)
