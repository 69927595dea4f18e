"""What DuckDB's binder says a query reads: the leaves of its unoptimised logical plan.

`EXPLAIN (FORMAT JSON)` with `explain_output = 'all'` gives the plan the binder and planner made,
views expanded, macros expanded, subqueries (in the select list, WHERE, ORDER BY, ...) planned
as joins, before any optimiser ran: the optimiser may prune a scan from statistics (`WHERE a >
1000` on a table whose maximum is 10), which would make the units depend on the data. Each
table read is one SEQ_SCAN naming it fully qualified; a file read is one reader leaf
(PARQUET_SCAN, READ_CSV, ...) that names no file; a registered Arrow object or a Python variable
is one PYTHON_* / ARROW_SCAN leaf. Data-free leaves (constants, CTE references, VALUES) are
dropped; any other leaf (duckdb_tables(), sqlite_scan, ...) is refused.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import duckdb

from pcor_sql.engine.unit_names import FIX, short, split_qualified
from pcor_sql.errors import UserError
from pcor_sql.sqltext.connection import relation_fix
from pcor_sql.sqltext.quoting import quote_literal

FILE_READERS = frozenset({
    "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json", "read_json_auto",
    "read_ndjson", "read_ndjson_auto", "read_text", "read_blob",
})
DATA_FREE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
# Plan leaves that read no stored rows: constants, CTE references, bind-time chunks (VALUES, DESCRIBE).
_DATA_FREE_LEAVES = frozenset({"DUMMY_SCAN", "CTE_SCAN", "CHUNK_GET", "EMPTY_RESULT", "EXPRESSION_GET", "DELIM_GET"})
_FILE_LEAVES = frozenset({f.upper() for f in FILE_READERS} | {"PARQUET_SCAN", "READ_CSV_AUTO", "READ_JSON_AUTO"})


def bind_error(label: str, exc: duckdb.Error) -> UserError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UserError(f"cannot resolve {label}: {first}", relation_fix(exc, "name an existing table, view or file"))


def plan_leaves(con: duckdb.DuckDBPyConnection, select: str, old: str, label: str) -> list[tuple[str, Any]]:
    """(kind, detail) of every leaf of the unoptimised plan of `select`: ('table', qualified
    parts), ('file', None) or ('object', None); data-free leaves are dropped, anything else
    refused. `old` is the caller's `explain_output`: a per-connection setting, set for this one
    EXPLAIN and then restored (a cursor would not do: it sees neither the caller's temp objects
    nor its USE). A query that does not bind fails on a plain EXPLAIN first, before any setting
    changes: a bind error aborts an open transaction, after which no SET could restore it."""
    changed = old.lower() != "all"
    try:
        if changed:
            con.execute(f"EXPLAIN {select}").fetchall()
    except duckdb.Error as exc:
        raise bind_error(label, exc) from None
    try:
        if changed:
            con.execute("SET explain_output = 'all'")
        rows = con.execute(f"EXPLAIN (FORMAT JSON) {select}").fetchall()
    except duckdb.Error as exc:
        raise bind_error(label, exc) from None
    finally:
        if changed:
            con.execute(f"SET explain_output = {quote_literal(old)}")
    plans = {key: json.loads(text) for key, text in rows}
    out: list[tuple[str, Any]] = []
    for leaf in _leaves(plans["logical_plan"]):
        name = str(leaf.get("name", ""))
        info = leaf.get("extra_info") or {}
        if name == "SEQ_SCAN" and isinstance(info, dict) and info.get("Table"):
            out.append(("table", split_qualified(info["Table"])))
        elif name in _FILE_LEAVES:
            out.append(("file", None))
        elif is_object_reader(name):
            out.append(("object", None))
        elif name not in _DATA_FREE_LEAVES and name.lower() not in DATA_FREE_FUNCTIONS:
            raise UserError(f"{label} reads {name.lower()}, which is not a table, a file or a registered object", FIX)
    return out


def _leaves(plan: Any) -> Iterator[dict[str, Any]]:
    for node in plan if isinstance(plan, list) else [plan]:
        children = node.get("children") or []
        if not children:
            yield node
        yield from _leaves(children)


def is_object_reader(name: str) -> bool:
    low = name.lower()
    return low.startswith("python_") or low in ("arrow_scan", "arrow_scan_dumb", "pandas_scan")


def describe_query(text: str, is_statement: bool) -> str:
    """How messages name what is resolved: 'the query ...' or 'the relation ...'."""
    return f"the {'query' if is_statement else 'relation'} {short(text)}"
