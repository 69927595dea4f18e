"""Privacy units of a query on Spark: the catalog tables and the files it reads (DESIGN.md §6).

Spark's analyzer resolves the whole SELECT statement — relation, select list, WHERE — or, for a
relation alone, `SELECT * FROM <relation>` (views expanded, names qualified); its analyzed plan
is walked, subqueries in expressions included, and each leaf names what it reads:
- a catalog table (a data-source, Hive or V2 table): its identifier, `spark_catalog.default.t`;
- files read by path (`parquet.`/data/x``, a temporary view over `spark.read.parquet(...)`):
  each file Spark lists for the relation, `file:/abs/path/part-0.parquet` (local paths made
  absolute with symlinks resolved and refused when hard-linked, as the DuckDB engine names
  them, `engine.unit_files`; other schemes kept);
- rows made in the driver (`createDataFrame` under a temporary view): `object:<view name>`;
- data-free leaves (range, one row) read nothing; any other leaf is refused.
Nothing is run: the analyzer and the file listing decide, so the units never depend on rows.
Unlike DuckDB's plan, Spark's names the files a leaf reads, so the plan alone attributes every
read (no parse walk to cross-check); a leaf the walk does not know is refused. Needs a classic
(JVM) SparkSession; Spark Connect has no analyzed plan to walk.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlparse

from pcor_sql.engine.unit_files import one_link_path
from pcor_sql.engine.units import Unit  # one privacy account, named as the DuckDB engine names it
from pcor_sql.errors import UserError
from pcor_sql.sqltext.build import select_from

FIX = "name a Spark table, a view over tables or files, or a file path (parquet.`/path`)"
_DATA_FREE = frozenset({"Range", "OneRowRelation", "LocalLimit", "CTERelationRef"})
_IN_DRIVER = frozenset({"LocalRelation", "LogicalRDD"})


def spark_units(access: Any, relation_sql: str) -> tuple[Unit, ...]:
    """The units a SELECT statement (DuckDB's text), or a relation alone, reads on Spark."""
    if not isinstance(relation_sql, str) or not relation_sql.strip():
        raise UserError("the relation is empty", "name a table, a view, a file or a subquery")
    df = access.dataframe(relation_sql if _is_statement(access.parser, relation_sql) else select_from("*", relation_sql), FIX)
    try:
        plan = df._jdf.queryExecution().analyzed()
    except AttributeError:
        raise UserError("privacy units need a classic SparkSession (not Spark Connect)", FIX) from None
    found: set[tuple[str, str]] = set()
    _walk(plan, None, found, relation_sql)
    if not found:
        raise UserError(f"the relation {relation_sql!r} reads no table or file", "name a table, a view or a file")
    return tuple(sorted(Unit(name, kind) for name, kind in found))


def _is_statement(parser: Any, text: str) -> bool:
    """Whether `text` is one SELECT statement rather than a relation, by DuckDB's parser."""
    doc = json.loads(parser.execute("SELECT system.main.json_serialize_sql($1)", [text]).fetchall()[0][0])
    return not doc.get("error") and len(doc.get("statements") or []) == 1


def _walk(node: Any, alias: str | None, found: set[tuple[str, str]], relation_sql: str) -> None:
    kind = node.getClass().getSimpleName()
    if kind == "SubqueryAlias":
        alias = str(node.identifier().name())
    elif kind == "LogicalRelation":
        table = node.catalogTable()
        if table.isDefined():
            found.add((_table_name(table.get().identifier()), "table"))
        else:
            files = _input_files(node.relation())
            if files is None:
                raise UserError(f"the relation {relation_sql!r} reads a source that is no table or file", FIX)
            found.update((_file_unit(f), "file") for f in files)
        return
    elif kind == "HiveTableRelation":
        found.add((_table_name(node.tableMeta().identifier()), "table"))
        return
    elif kind in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
        ident, catalog = node.identifier(), node.catalog()
        if not (ident.isDefined() and catalog.isDefined()):
            raise UserError(f"the relation {relation_sql!r} reads a table with no catalog name", FIX)
        parts = [str(catalog.get().name()), *[str(p) for p in ident.get().namespace()], str(ident.get().name())]
        found.add((".".join(parts), "table"))
        return
    elif kind in _IN_DRIVER:
        if alias is None:
            raise UserError(f"the relation {relation_sql!r} reads rows made in the driver under no name", FIX)
        found.add((f"object:{alias}", "object"))
        return
    children = node.children()
    subqueries = node.subqueries()
    if children.size() == 0 and subqueries.size() == 0 and kind not in _DATA_FREE:
        raise UserError(f"the relation {relation_sql!r} reads a {kind}, which is no table or file", FIX)
    for seq in (children, subqueries):
        for i in range(seq.size()):
            _walk(seq.apply(i), alias, found, relation_sql)


def _table_name(identifier: Any) -> str:
    """catalog.database.table of a TableIdentifier (the session catalog when none is named)."""
    catalog = identifier.catalog()
    database = identifier.database()
    parts = [str(catalog.get()) if catalog.isDefined() else "spark_catalog"]
    if database.isDefined():
        parts.append(str(database.get()))
    parts.append(str(identifier.table()))
    return ".".join(parts)


def _input_files(relation: Any) -> list[str] | None:
    if relation.getClass().getSimpleName() != "HadoopFsRelation":
        return None
    return [str(f) for f in relation.inputFiles()]


def _file_unit(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return "file:" + one_link_path(unquote(parsed.path))
    return uri
