"""Privacy units: the base tables, files and registered objects a relation reads (DESIGN.md §6).

The ledger charges a release to every unit its relation reads, so the unit must not depend on
how the relation is spelled: `t`, `main.t`, `memory.main.t`, `t AS s`, `(SELECT * FROM t)`, a
view over t, a CTE and `USE other` then `memory.t` all name one unit, and a join names both.

- **Tables** come from DuckDB's binder: the unoptimised logical plan of `SELECT * FROM <relation>`
  (EXPLAIN with `explain_output = 'all'`) has one SEQ_SCAN per table read, fully qualified and
  with views expanded. The optimised plan is not used: statistics can prune a scan to an empty
  result (`WHERE a > 1000` on a table whose maximum is 10), which would make the units depend on
  the data. A table loaded from the bundled data carries the comment `pcor-sql bundled dataset:
  <name>` and is the unit `bundled:<name>`, wherever and under whatever name it was loaded.
- **Files** do not appear in the plan by name, so the parsed statement is walked, and through
  it every view and CTE it reads (a view in its own catalog and schema): replacement scans
  (`FROM 'x.parquet'`) and file readers (`read_parquet(...)` etc., a literal path or a list of
  them). Each path is expanded by DuckDB's `glob()` (which honours `file_search_path`), so a glob
  charges every file it reads; the unit is `file:` + the real absolute path (symlinks resolved).
- **Objects** registered with `con.register(name, arrow_table)` are temp views over a process-local
  scan; the unit is `object:temp.main.<name>`.
- Data-free sources (range, generate_series, unnest, VALUES) are no unit. Anything else the plan
  reads (sqlite_scan, duckdb_tables(), a table macro) is refused. The plan is the cross-check:
  if it reads more files or objects than the walk attributed (a scalar macro's subquery, a
  Python variable found by replacement scan), the relation is refused. Safe by default: where
  the walk cannot tell which of several same-named views the binder picks, it charges them all.

Never reads rows: the binder, the catalog and the file system decide everything, so the units
are a function of the catalog and the file names only (binding a CSV or JSON reader makes
DuckDB sniff the file's head for its schema, but nothing read changes the result).

Cost: catalog statements only. One for the parse, the settings and the catalog's names; a plain
EXPLAIN under the caller's settings (a relation that does not bind fails there, before any
setting changes: a bind error aborts an open transaction, after which no SET could restore it);
the JSON EXPLAIN between a SET and its restore; once views are reached, one statement for their
SQL and one parse per level of nesting; one glob() for all file paths. About 10 ms for a bundled
table on a loaded 2-core machine where `SELECT 1` takes 1 ms.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

import duckdb

from pcor_sql.engine.datasets import BUNDLED, BUNDLED_COMMENT_PREFIX
from pcor_sql.errors import UserError
from pcor_sql.sqltext.connection import relation_fix
from pcor_sql.sqltext.quoting import quote_literal

FIX = "register a view over a table or a file path the engine can resolve"
FILE_READERS = frozenset({
    "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json", "read_json_auto",
    "read_ndjson", "read_ndjson_auto", "read_text", "read_blob",
})
DATA_FREE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
# Plan leaves that read no stored rows: constants, CTE references, bind-time chunks (VALUES, DESCRIBE).
_DATA_FREE_LEAVES = frozenset({"DUMMY_SCAN", "CTE_SCAN", "CHUNK_GET", "EMPTY_RESULT", "EXPRESSION_GET", "DELIM_GET"})
_FILE_LEAVES = frozenset({f.upper() for f in FILE_READERS} | {"PARQUET_SCAN", "READ_CSV_AUTO", "READ_JSON_AUTO"})
_PATH_SUFFIXES = (".parquet", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".txt", ".gz", ".zst", ".arrow")
_MAX_DEPTH = 64

_CATALOG_SQL = """
SELECT json_serialize_sql($1), current_setting('explain_output'), current_setting('search_path'),
       current_database(), current_schema(),
       (SELECT list((database_name, schema_name, table_name, comment)) FROM duckdb_tables()),
       (SELECT list((database_name, schema_name, view_name)) FROM duckdb_views() WHERE NOT internal)"""
# Rendering every view's SQL costs more than the rest of the catalog query: only done once a view is reached.
_VIEW_SQL = "SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal"


@dataclass(frozen=True, order=True)
class Unit:
    """One privacy account: `name` is 'memory.main.salaries', 'file:/abs/path/x.parquet',
    'bundled:salaries' or 'object:temp.main.df'; `kind` is 'table', 'file', 'object' or 'bundled'."""

    name: str
    kind: str


def resolve_units(con: duckdb.DuckDBPyConnection, relation_sql: str) -> tuple[Unit, ...]:
    """The units `SELECT * FROM <relation_sql>` reads on `con`: sorted, unique, non-empty.
    A relation that does not bind (unknown table, syntax) or reads something that is no
    table, file or registered object is a one-line UserError."""
    if not isinstance(relation_sql, str) or not relation_sql.strip():
        raise UserError("the relation is empty", "name a table, a view, a file or a subquery")
    select = f"SELECT * FROM {relation_sql}"
    try:
        row = con.execute(_CATALOG_SQL, [select]).fetchall()[0]
    except duckdb.Error as exc:
        raise _bind_error(relation_sql, exc) from None
    doc, explain_output, search_path, database, schema, tables, views = row
    node = _one_select(json.loads(doc), relation_sql)
    leaves = _plan_leaves(con, select, explain_output, relation_sql)
    catalog = _Catalog(tables or [], views or [], search_path, database, schema)
    walk = _Walk(con, catalog)
    walk.query(node, context=None, depth=0)
    walk.finish()

    reads = Counter(kind for kind, _ in leaves)
    for kind in ("file", "object"):
        if reads[kind] > walk.counts[kind]:
            raise UserError(
                f"the relation {_short(relation_sql)} reads {reads[kind] - walk.counts[kind]} {kind} source(s) "
                "that cannot be attributed (through a macro or a replacement scan of a Python variable)", FIX)
    units = {catalog.table_unit(parts) for kind, parts in leaves if kind == "table"}
    units |= walk.units
    if not units:
        raise UserError(f"the relation {_short(relation_sql)} reads no table or file", "name a table, a view or a file")
    return tuple(sorted(units))


def resolve_spelling(con: duckdb.DuckDBPyConnection, spelling: str) -> tuple[Unit, ...]:
    """The units a hand-typed name denotes (for `budget set-limit UNIT`): a table or view
    ('wages', 'main.wages', 'memory.main.wages', any relation), a file path quoted or not,
    relative or absolute, globs allowed ('data/w*.parquet'), or a unit name ('file:/abs/x.parquet',
    'bundled:salaries', 'object:temp.main.df', 'memory.main.wages')."""
    text = spelling.strip() if isinstance(spelling, str) else ""
    if not text:
        raise UserError("the unit is empty", "name a table, a view, a file or a unit such as bundled:salaries")
    if text.startswith("file:"):
        return _file_units(con, [text[len("file:"):]])
    if text.startswith("bundled:"):
        name = text[len("bundled:"):]
        if name not in BUNDLED:
            raise UserError(f"unknown bundled dataset {name!r}", f"use one of: {', '.join(BUNDLED)}")
        return (Unit(text, "bundled"),)
    if text.startswith("object:"):
        units = resolve_units(con, text[len("object:"):])
        if units != (Unit(text, "object"),):
            raise UserError(f"{text} is not a registered object", "register it with con.register(name, table)")
        return units
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return _file_units(con, [text[1:-1].replace("''", "'")])
    unquoted = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    if _looks_like_path(unquoted):
        return _file_units(con, [unquoted])
    return resolve_units(con, text)


def _looks_like_path(text: str) -> bool:
    return (
        any(ch in text for ch in "/\\*?[") or text.startswith(("~", "."))
        or text.lower().endswith(_PATH_SUFFIXES) or "://" in text
    )


def _short(relation_sql: str) -> str:
    one_line = " ".join(relation_sql.split())
    return repr(one_line if len(one_line) <= 60 else one_line[:57] + "...")


def _bind_error(relation_sql: str, exc: duckdb.Error) -> UserError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UserError(
        f"cannot resolve the relation {_short(relation_sql)}: {first}",
        relation_fix(exc, "name an existing table, view or file"),
    )


def _one_select(doc: dict[str, Any], relation_sql: str) -> dict[str, Any]:
    if doc.get("error"):
        message = (str(doc.get("error_message") or "not a query").splitlines() or [""])[0]
        raise UserError(f"cannot parse the relation {_short(relation_sql)}: {message}", "give one table, view, file or subquery")
    statements = doc.get("statements") or []
    if len(statements) != 1:
        raise UserError(f"the relation {_short(relation_sql)} holds {len(statements)} statements", "give exactly one relation")
    return statements[0]["node"]


def _plan_leaves(con: duckdb.DuckDBPyConnection, select: str, old: str, relation_sql: str) -> list[tuple[str, Any]]:
    """(kind, detail) of every leaf of the unoptimised plan: ('table', qualified parts),
    ('file', None) or ('object', None); data-free leaves are dropped, anything else refused.
    `explain_output` is a per-connection setting: set for this one EXPLAIN, then restored (a
    cursor would not do: it sees neither the caller's temp objects nor its USE)."""
    changed = old.lower() != "all"
    try:
        if changed:
            con.execute(f"EXPLAIN {select}").fetchall()
    except duckdb.Error as exc:
        raise _bind_error(relation_sql, exc) from None
    try:
        if changed:
            con.execute("SET explain_output = 'all'")
        rows = con.execute(f"EXPLAIN (FORMAT JSON) {select}").fetchall()
    except duckdb.Error as exc:
        raise _bind_error(relation_sql, exc) from None
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
        elif _is_object_reader(name):
            out.append(("object", None))
        elif name not in _DATA_FREE_LEAVES and name.lower() not in DATA_FREE_FUNCTIONS:
            raise UserError(
                f"the relation {_short(relation_sql)} reads {name.lower()}, which is not a table, a file "
                "or a registered object", FIX)
    return out


def _leaves(plan: Any) -> Iterator[dict[str, Any]]:
    for node in plan if isinstance(plan, list) else [plan]:
        children = node.get("children") or []
        if not children:
            yield node
        yield from _leaves(children)


def _is_object_reader(name: str) -> bool:
    low = name.lower()
    return low.startswith("python_") or low in ("arrow_scan", "arrow_scan_dumb", "pandas_scan")


_PART = re.compile(r'"((?:[^"]|"")*)"|([^."]+)')


def split_qualified(text: str) -> tuple[str, ...]:
    """`memory.main."my.t"` → ('memory', 'main', 'my.t'): DuckDB's rendering of a qualified
    name (parts double-quoted where needed, inner quotes doubled) split into its parts."""
    return tuple(m[2] if m[1] is None else m[1].replace('""', '"') for m in _PART.finditer(text))


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def canonical_name(parts: tuple[str, ...]) -> str:
    """Parts joined by dots, each double-quoted only when it is not a plain identifier."""
    return ".".join(p if _PLAIN.fullmatch(p) else '"' + p.replace('"', '""') + '"' for p in parts)


class _Catalog:
    """The catalog as one query saw it, and DuckDB's name lookup over it."""

    def __init__(self, tables: list, views: list, search_path: str, database: str, schema: str):
        self.tables = {_low(r[:3]): (tuple(r[:3]), r[3]) for r in tables}
        self.views = {_low(r): tuple(r) for r in views}
        self.paths: list[tuple[str, str]] = [("temp", "main")]
        for entry in re.findall(r'(?:"(?:[^"]|"")*"|[^,\s])+', search_path or ""):
            parts = split_qualified(entry)
            self.paths += [parts[:2]] if len(parts) == 2 else [(parts[0], "main"), (database, parts[0])]
        self.paths += [(database, schema), (database, "main"), ("system", "main"), ("system", "pg_catalog")]

    def candidates(self, ref: dict[str, Any], context: tuple[str, str, str] | None) -> list[tuple[str, str, str]]:
        """Every (database, schema, name) the binder could mean by a BASE_TABLE reference, in
        its search order: temp first, then the view's own schema, then the session's path."""
        catalog, schema, name = ref.get("catalog_name") or "", ref.get("schema_name") or "", ref["table_name"]
        paths = self.paths[:1] + ([(context[0], context[1])] if context else []) + self.paths[1:]
        if catalog:
            entries = [(catalog, schema)]
        elif schema:
            entries = [(db, schema) for db, _ in paths] + [(schema, "main")]
        else:
            entries = paths
        return [(db, sch, name) for db, sch in entries]

    def table_unit(self, parts: tuple[str, ...]) -> Unit:
        found = self.tables.get(_low(parts))
        comment = (found[1] or "") if found else ""
        if comment.startswith(BUNDLED_COMMENT_PREFIX):
            return Unit("bundled:" + comment[len(BUNDLED_COMMENT_PREFIX):], "bundled")
        return Unit(canonical_name(found[0] if found else parts), "table")


def _low(parts: Any) -> tuple[str, ...]:
    return tuple(str(p).lower() for p in parts)


class _Walk:
    """Walks parsed statements for what the plan does not name: files and registered objects.
    Views found are parsed in batches (one statement per level of nesting) and walked in their
    own catalog and schema; each reference counts once, as the plan has one scan per reference."""

    def __init__(self, con: duckdb.DuckDBPyConnection, catalog: _Catalog):
        self.con, self.catalog = con, catalog
        self.units: set[Unit] = set()
        self.counts: Counter[str] = Counter()
        self.paths: list[str] = []
        self.pending: list[tuple[tuple[str, str, str], int]] = []
        self.view_sql: dict[tuple[str, ...], str] | None = None

    def query(self, node: Any, context: tuple[str, str, str] | None, depth: int, scope: tuple = ()) -> None:
        """Walk one parsed query; `context` is the view it is the body of (None at the top)."""
        if depth > _MAX_DEPTH:
            raise UserError("the relation nests views more than 64 deep", "simplify the views")
        for obj, chain in _nodes(node, scope):
            kind = obj.get("type")
            if kind == "BASE_TABLE" and "table_name" in obj:
                self._reference(obj, chain, context, depth)
            elif kind == "TABLE_FUNCTION":
                self._function(obj.get("function") or {}, context)

    def _reference(self, ref: dict[str, Any], chain: tuple, context: tuple[str, str, str] | None, depth: int) -> None:
        if not ref.get("catalog_name") and not ref.get("schema_name"):
            cte = _find_cte(chain, ref["table_name"])
            if cte is not None:
                body, body_chain, walked = cte
                if not walked[0]:
                    walked[0] = True
                    self.query(body, context, depth + 1, body_chain)
                return
        candidates = self.catalog.candidates(ref, context)
        views = [self.catalog.views[k] for k in map(_low, candidates) if k in self.catalog.views]
        if any(_low(c) in self.catalog.tables for c in candidates) or views:
            # Views the binder could pick are all walked (charging too much is the safe mistake).
            self.pending += [(parts, depth + 1) for parts in views]
            return
        self.counts["file"] += 1  # a replacement scan: DuckDB found a file (or a Python variable)
        self.paths.append(ref["table_name"])

    def _function(self, function: dict[str, Any], context: tuple[str, str, str] | None) -> None:
        name = str(function.get("function_name", "")).lower()
        if name in DATA_FREE_FUNCTIONS:
            return
        if name in FILE_READERS:
            self.counts["file"] += 1
            self.paths += _path_arguments(function, name)
            return
        if _is_object_reader(name) and context is not None and context[0].lower() == "temp":
            self.counts["object"] += 1
            self.units.add(Unit("object:" + canonical_name(context), "object"))
            return
        raise UserError(f"the relation reads the table function {name}(), which the engine cannot charge", FIX)

    def finish(self) -> None:
        """Walk the views found (level by level), then turn the file paths into units."""
        while self.pending:
            batch, self.pending = self.pending, []
            if self.view_sql is None:
                self.view_sql = {_low(r[:3]): r[3] for r in self.con.execute(_VIEW_SQL).fetchall()}
            selects = [_view_select(self.view_sql.get(_low(parts), ""), parts) for parts, _ in batch]
            docs = self.con.execute("SELECT list(json_serialize_sql(s)) FROM unnest($1::VARCHAR[]) AS u(s)", [selects]).fetchall()[0][0]
            for (parts, depth), doc in zip(batch, docs):
                self.query(_one_select(json.loads(doc), canonical_name(parts)), parts, depth)
        if self.paths:
            self.units.update(_file_units(self.con, self.paths))


def _nodes(obj: Any, chain: tuple) -> Iterator[tuple[dict[str, Any], tuple]]:
    """Every dict under `obj` with the CTE scope chain in force there; CTE bodies are not entered
    (they are walked when first referenced, as the plan holds only referenced CTEs)."""
    if isinstance(obj, list):
        for item in obj:
            yield from _nodes(item, chain)
        return
    if not isinstance(obj, dict):
        return
    if isinstance(obj.get("cte_map"), dict):
        frame: dict[str, tuple] = {}
        chain = chain + (frame,)
        for entry in obj["cte_map"].get("map") or []:
            body = entry["value"]["query_node"]
            recursive = body.get("type") == "RECURSIVE_CTE_NODE"
            # A CTE sees the CTEs before it (and itself if recursive), and the enclosing scopes.
            earlier = dict(frame)
            body_chain = chain[:-1] + (earlier,)
            entry_value = (body, body_chain, [False])
            if recursive:
                earlier[entry["key"].lower()] = entry_value
            frame[entry["key"].lower()] = entry_value
    yield obj, chain
    for key, value in obj.items():
        if key != "cte_map":
            yield from _nodes(value, chain)


def _find_cte(chain: tuple, name: str) -> tuple | None:
    for frame in reversed(chain):
        if name.lower() in frame:
            return frame[name.lower()]
    return None


def _path_arguments(function: dict[str, Any], name: str) -> list[str]:
    """The literal path (or list of paths) a file reader's first argument gives."""
    args = [a for a in function.get("arguments") or [] if not a.get("name")]
    expr = (args[0].get("expression") or {}) if args else {}
    items = expr.get("arguments") if expr.get("function_name") == "list_value" else [{"expression": expr}]
    paths = []
    for item in items or [{}]:
        literal = (item.get("expression") or {}).get("literal") or {}
        if expr.get("class") not in ("CONSTANT", "FUNCTION") or literal.get("kind") != "STRING":
            raise UserError(f"{name}() is given its path as an expression", "give the path as a string literal or a list of them")
        paths.append(literal["text"])
    return paths


def _view_select(create_sql: str, parts: tuple[str, ...]) -> str:
    """The query of a stored `CREATE [TEMP] VIEW name [(cols)] AS <query>`: the text after the
    first AS keyword, found by DuckDB's tokenizer (offsets count UTF-8 bytes)."""
    data = create_sql.encode("utf-8")
    tokens = duckdb.tokenize(create_sql)
    ends = [start for start, _ in tokens[1:]] + [len(data)]
    for (start, kind), end in zip(tokens, ends):
        if kind == duckdb.token_type.keyword and data[start:end].strip().upper() == b"AS":
            return data[start + 2:].decode("utf-8")
    raise UserError(f"cannot read the definition of the view {canonical_name(parts)}", "recreate the view")


def _file_units(con: duckdb.DuckDBPyConnection, paths: list[str]) -> tuple[Unit, ...]:
    """`file:` units of every file the paths and globs match, by DuckDB's glob(), in one statement."""
    local = [p for p in dict.fromkeys(paths) if "://" not in p or any(c in p for c in "*?[")]
    units = {Unit("file:" + p, "file") for p in dict.fromkeys(paths) if p not in local}
    if local:
        union = " UNION ALL ".join(f"SELECT {i} AS i, file FROM glob(${i + 1})" for i in range(len(local)))
        try:
            rows = con.execute(union, local).fetchall()
        except duckdb.Error as exc:
            raise UserError(f"cannot list the files {local[0]!r}: {str(exc).splitlines()[0]}", "give a readable path") from None
        matched = {i for i, _ in rows}
        missing = [p for i, p in enumerate(local) if i not in matched]
        if missing:
            raise UserError(f"{missing[0]!r} is not a table, a view or an existing file", FIX)
        units |= {Unit("file:" + os.path.realpath(os.path.expanduser(f)), "file") for _, f in rows}
    return tuple(sorted(units))
