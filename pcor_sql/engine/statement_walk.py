"""The parse walk: what a query reads that its plan does not name — files and registered objects.

The parsed statement (DuckDB's `json_serialize_sql`) is walked everywhere — FROM, the select
list, WHERE, subqueries, CTEs — and through it every view it reaches, each in its own catalog
and schema (a view's stored SQL is parsed, one statement per level of nesting). Each reference
counts once, as the plan has one scan per reference (a CTE once: DuckDB plans it once).

A name binds to one catalog entry, or it is a replacement scan (a file path, or a Python
variable). Rather than replay DuckDB's search order, every entry the name could mean is
collected (`n`: every table or view called n; `s.n`: those in a schema or catalog called s;
`c.s.n`: that one): one entry is the binding; several tables are fine (the plan names the one
read); but where a view is among several, the walk cannot know which one the binder picks, and
the query is refused — a temp view shadowing a view of the same name, say. An entry named like
a file path is refused too: DuckDB would read the file if the entry is not on its search path.

The walk also notes the functions a query calls, whether any expression looks a function up by
name, and whether a file read hangs on a function call, for `user_functions` (macros that read
are refused).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterator

import duckdb

from pcor_sql.engine.name_lookup import Catalog, Entry
from pcor_sql.engine.plan_reads import DATA_FREE_FUNCTIONS, FILE_READERS, FIX, is_object_reader
from pcor_sql.engine.unit_names import Unit, canonical_name, low
from pcor_sql.engine.user_functions import called_names, looks_up_functions
from pcor_sql.errors import UserError

_MAX_DEPTH = 64
# Rendering every view's SQL costs more than the rest of the catalog query: only done once a view is reached.
_VIEW_SQL = "SELECT database_name, schema_name, view_name, sql FROM system.main.duckdb_views() WHERE NOT internal"
# Functions qualified, as in every catalog query of the engine: a user macro may take any name.
_PARSE_ALL = ("SELECT system.main.list(system.main.json_serialize_sql(s)) "
              "FROM system.main.unnest($1::VARCHAR[]) AS u(s)")


class Walk:
    """Walks one query and the views it reaches. After `finish()`: `units` (registered objects),
    `counts` of file and object reads, `paths` of the files, `called` function names, `lookups`
    (some expression looks a function up by name) and `fragile` (a file read hangs on a call:
    an argument, a subquery in one, or a file reader table function)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, catalog: Catalog, label: str):
        self.con, self.catalog, self.label = con, catalog, label
        self.units: set[Unit] = set()
        self.counts: Counter[str] = Counter()
        self.paths: list[str] = []
        self.called: set[str] = set()
        self.lookups = False
        self.fragile = False
        self.pending: list[tuple[Entry, int, bool]] = []
        self.view_sql: dict[tuple[str, ...], str] | None = None

    def query(self, node: Any, context: Entry | None, depth: int, scope: tuple = (), under_call: bool = False) -> None:
        """Walk one parsed query; `context` is the view it is the body of (None at the top);
        `under_call`: the query is (inside) an argument of a function call."""
        if depth > _MAX_DEPTH:
            raise UserError(f"{self.label} nests views more than 64 deep", "simplify the views")
        for obj, chain, called in _nodes(node, scope, under_call):
            kind = obj.get("type")
            if kind == "BASE_TABLE" and "table_name" in obj:
                self._reference(obj, chain, context, depth, called)
            elif kind == "TABLE_FUNCTION":
                self._function(obj.get("function") or {}, context)
            if "class" in obj:
                self.lookups = self.lookups or looks_up_functions(obj)
                name = called_names(obj)
                if name:
                    self.called.add(name)

    def _reference(self, ref: dict[str, Any], chain: tuple, context: Entry | None, depth: int, under_call: bool) -> None:
        if not ref.get("catalog_name") and not ref.get("schema_name"):
            cte = _find_cte(chain, ref["table_name"])
            if cte is not None:
                body, body_chain, walked = cte
                if not walked[0]:
                    walked[0] = True
                    self.query(body, context, depth + 1, body_chain, under_call)
                return
        found = self.catalog.binding(ref, self.label)
        if found is None:
            self.counts["file"] += 1  # a replacement scan: DuckDB found a file (or a Python variable)
            self.paths.append(ref["table_name"])
            self.fragile = self.fragile or under_call
        elif found[0] == "view":
            self.pending.append((found[1], depth + 1, under_call))

    def _function(self, function: dict[str, Any], context: Entry | None) -> None:
        name = str(function.get("function_name", "")).lower()
        if name in DATA_FREE_FUNCTIONS:
            return
        if name in FILE_READERS:
            self.counts["file"] += 1
            self.paths += _path_arguments(function, name)
            self.fragile = True  # a macro of the reader's name would read something else
            return
        if is_object_reader(name) and context is not None and context[0].lower() == "temp":
            self.counts["object"] += 1
            self.units.add(Unit("object:" + canonical_name(context), "object"))
            self.fragile = True  # as for a file reader: a macro of its name would read something else
            return
        raise UserError(f"{self.label} reads the table function {name}(), which the engine cannot charge", FIX)

    def finish(self) -> None:
        """Walk the views found, level by level (one statement for their SQL, one parse per level)."""
        while self.pending:
            batch, self.pending = self.pending, []
            if self.view_sql is None:
                self.view_sql = {low(r[:3]): r[3] for r in self.con.execute(_VIEW_SQL).fetchall()}
            selects = [view_select(self.view_sql.get(low(parts), ""), parts) for parts, _, _ in batch]
            docs = self.con.execute(_PARSE_ALL, [selects]).fetchall()[0][0]
            for (parts, depth, under_call), doc in zip(batch, docs):
                self.query(one_select(json.loads(doc), f"the view {canonical_name(parts)}"), parts, depth, (), under_call)


def one_select(doc: dict[str, Any], label: str) -> dict[str, Any]:
    """The one SELECT node of a `json_serialize_sql` document; a UserError otherwise."""
    if doc.get("error"):
        message = (str(doc.get("error_message") or "not a query").splitlines() or [""])[0]
        raise UserError(f"cannot parse {label}: {message}", "give one table, view, file, subquery or SELECT")
    statements = doc.get("statements") or []
    if len(statements) != 1:
        raise UserError(f"{label} holds {len(statements)} statements", "give exactly one relation or SELECT")
    return statements[0]["node"]


def _nodes(obj: Any, chain: tuple, under_call: bool) -> Iterator[tuple[dict[str, Any], tuple, bool]]:
    """Every dict under `obj` with the CTE scope chain in force there and whether it lies under
    an expression that looks a function up (an argument, or a subquery in one); CTE bodies are
    not entered (they are walked when first referenced, as the plan holds only referenced CTEs)."""
    if isinstance(obj, list):
        for item in obj:
            yield from _nodes(item, chain, under_call)
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
    yield obj, chain, under_call
    under_call = under_call or ("class" in obj and looks_up_functions(obj))
    for key, value in obj.items():
        if key != "cte_map":
            yield from _nodes(value, chain, under_call)


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


def view_select(create_sql: str, parts: tuple[str, ...]) -> str:
    """The query of a stored `CREATE [TEMP] VIEW name [(cols)] AS <query>`: the text after the
    first AS keyword, found by DuckDB's tokenizer (offsets count UTF-8 bytes)."""
    data = create_sql.encode("utf-8")
    tokens = duckdb.tokenize(create_sql)
    ends = [start for start, _ in tokens[1:]] + [len(data)]
    for (start, kind), end in zip(tokens, ends):
        if kind == duckdb.token_type.keyword and data[start:end].strip().upper() == b"AS":
            return data[start + 2:].decode("utf-8")
    raise UserError(f"cannot read the definition of the view {canonical_name(parts)}", "recreate the view")
