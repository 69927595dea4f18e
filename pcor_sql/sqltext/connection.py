"""The caller's connection: the one check that an argument is a DuckDB connection, and the
hint for a relation it cannot see.

Without the check, a string or None passed as `con` fails deep inside with "'str' object has
no attribute 'execute'"; every public entry point that takes a connection calls it first.

DuckDB finds a pandas, Polars or Arrow object named in FROM by looking through the Python
frames of the code that runs the query ("replacement scans"): when pcor-sql runs it, those
are pcor-sql's frames, not the caller's. `objects_in_scope` looks where DuckDB's own
`duckdb.sql` would (the caller's frames, innermost first: locals, then globals) for a pandas,
Polars or Arrow object named in FROM that the connection's catalog lacks, and registers it for
the call. The privacy unit is then the registered object's (`object:temp.main.<name>`, see
`engine.unit_names`), with a warning: an in-memory object has no identity beyond this process.
A name the catalog has is never shadowed by a Python variable (the catalog wins, as in DuckDB).
Anything else is "Table with name df does not exist", and `relation_fix` says to register it.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import duckdb

from pcor_sql.errors import UserError, from_python, warn_privacy

_MISSING = re.compile(r"Table with name (\S+?)!? does not exist")
# DuckDB's binder: a name it took for a column that no relation of the FROM clause has.
_NO_COLUMN = re.compile(r'Referenced column "((?:[^"]|"")+)" not found|does not have a column named "((?:[^"]|"")+)"')
_CANDIDATES = re.compile(r"Candidate bindings:[ :]*(.*)")
# What precedes a value in a comparison: a name there that is no column was meant as a string
# (`state = "CA"`: double quotes make an identifier in SQL, single quotes a string).
_VALUE_PLACE = re.compile(r"(?:=|<>|!=|<|>|\bLIKE|\bILIKE|\bIN\s*\([^()]*)\s*$", re.IGNORECASE)


def require_connection(con: object, who: str) -> duckdb.DuckDBPyConnection:
    """`con` itself if it is a DuckDB connection; else a UserError naming `who` took it."""
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise UserError(
            f"{who} needs a DuckDB connection, got {type(con).__name__}",
            "pass duckdb.connect(...) (or an existing connection)",
        )
    return con


def relation_fix(exc: BaseException, fix: str) -> str:
    """`fix`, led — for a Python caller whose FROM names a table DuckDB cannot find — by how
    to make a DataFrame or Arrow table visible: `con.register('df', df)`."""
    column = column_fix(exc)
    if column is not None:
        return column
    found = _MISSING.search(str(exc))
    if found is None or not from_python():
        return fix
    name = found.group(1).strip('"')
    return (
        f"if {name} is a pandas, Polars or Arrow object, register it on the connection first: "
        f"con.register({name!r}, {name}); otherwise {fix}"
    )


def column_fix(exc: BaseException) -> str | None:
    """For a binder error naming a column that does not exist: if the name stands where a value
    goes (`state = "CA"`, after `=`, `LIKE`, inside `IN (...)`), that it is a string to write in
    single quotes; otherwise that no such column exists, with DuckDB's nearest column names.
    None for any other error."""
    text = str(exc)
    found = _NO_COLUMN.search(text)
    if found is None:
        return None
    name = (found.group(1) or found.group(2)).replace('""', '"')
    if _at_value_place(text):
        literal = "'" + name.replace("'", "''") + "'"
        return (f"use single quotes for a string: {literal} (double quotes, or none, name a column, "
                f"and there is no column {name})")
    near = _CANDIDATES.search(text)
    names = re.findall(r'"((?:[^"]|"")+)"', near.group(1)) if near else []
    names = [n.replace('""', '"') for n in names]
    if not names:
        return f"there is no column {name}: name an existing column of the FROM clause (DESCRIBE it to list them)"
    return f"there is no column {name}: did you mean {names[0]}? (nearest columns: {', '.join(names)})"


def _at_value_place(text: str) -> bool:
    """Whether DuckDB's caret (the line of `^` under `LINE n: ...`) marks a name that stands
    where a value is compared."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        caret = lines[i + 1]
        if line.startswith("LINE ") and "^" in caret:
            return _VALUE_PLACE.search(line[:caret.index("^")]) is not None
    return False


#: The top-level packages whose objects DuckDB reads by a replacement scan.
_FRAME_PACKAGES = ("pandas", "polars", "pyarrow")
# Built-ins qualified: a user macro named `lower` or `count_star` must not decide what is read.
_CATALOG_SQL = ("SELECT system.main.count_star() FROM (SELECT table_name AS name FROM system.main.duckdb_tables() "
                "UNION ALL SELECT view_name FROM system.main.duckdb_views()) "
                "WHERE system.main.lower(name) = system.main.lower($1)")


@contextmanager
def objects_in_scope(con: Any, query: str, warn: Callable[[str], None] | None = None) -> Iterator[None]:
    """Within the block, every unqualified name in `query`'s FROM that the connection's catalog
    lacks and that names a pandas, Polars or Arrow object in the Python caller's scope is
    registered on `con` (then unregistered). Nothing happens for the CLI, another engine, or a
    query DuckDB cannot parse (its own error follows, with `relation_fix`'s hint)."""
    ours = isinstance(con, duckdb.DuckDBPyConnection) and isinstance(query, str) and from_python()
    found = _scope_objects(con, query) if ours else {}
    for name, obj in found.items():
        con.register(name, obj)
        warn_privacy(
            f"{name} is a {type(obj).__module__.split('.')[0]} object from the caller's scope, read as if "
            f"registered and charged to the unit object:temp.main.{name}: an in-memory object has no "
            "identity beyond this process (the same rows under another name, or in another process, "
            "start a fresh budget) — load it into a table of a DuckDB file to keep one budget for it",
            warn, stacklevel=5)
    try:
        yield
    finally:
        for name in found:
            con.unregister(name)


def _scope_objects(con: duckdb.DuckDBPyConnection, query: str) -> dict[str, Any]:
    try:
        names = {n for n in duckdb.get_table_names(query, qualified=False) if "." not in n}
    except duckdb.Error:
        return {}  # an unparsable query: its own error follows
    found: dict[str, Any] = {}
    frame = _caller_frame()
    while frame is not None and len(found) < len(names):
        for name in names - found.keys():
            for obj in (frame.f_locals.get(name), frame.f_globals.get(name)):
                if obj is not None and type(obj).__module__.split(".")[0] in _FRAME_PACKAGES:
                    found[name] = obj
                    break
        frame = frame.f_back
    # The catalog is asked only about names a frame holds a table for (the usual call: none).
    try:
        return {name: obj for name, obj in sorted(found.items()) if not _in_catalog(con, name)}
    except duckdb.Error:
        return {}  # a closed connection: its own error follows


def _in_catalog(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    # The connection itself, not a cursor: its temporary tables and registered objects are its own.
    return bool(con.execute(_CATALOG_SQL, [name]).fetchall()[0][0])


def _caller_frame() -> Any:
    """The innermost frame outside pcor-sql: where the caller's variables live."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "pcor_sql":
        frame = frame.f_back
    return frame
