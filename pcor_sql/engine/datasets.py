"""The bundled datasets: load them into any DuckDB connection, describe them, export them.

Three tables ship with the package as Parquet files in the shipped `datasets/` folder:
`salaries` and `homicides` (synthetic, shaped like the two datasets of the PCOR paper, §6.1,
with planted contextual outliers) and `diamonds` (ggplot2's real data, MIT licence). Each
table's context attributes load as DuckDB ENUM types over their *declared* domains
(`domains.json`), which include values that no row has: the paper (§4) enumerates whole
domains so that a released context does not reveal which values occur in the data, and the
engine takes the domains from the ENUM types. Loading works offline and needs nothing but
the shipped files.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pcor_sql.errors import InternalError, UserError
from pcor_sql.resources import shipped_dir
from pcor_sql.sqltext.build import parquet_file, select_from
from pcor_sql.sqltext.connection import require_connection
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

BUNDLED = ("salaries", "homicides", "diamonds")
# The table comment that marks a loaded bundled table: the privacy-unit resolver (engine/units.py)
# names such a table `bundled:<name>`, the same account wherever and under whatever name it is loaded.
BUNDLED_COMMENT_PREFIX = "pcor-sql bundled dataset: "
EXPORT_FORMATS = ("parquet", "duckdb")


@dataclass(frozen=True)
class DatasetInfo:
    """What one bundled dataset holds and where it comes from."""

    name: str
    rows: int
    id_column: str
    metric: str
    attributes: tuple[str, ...]
    description: str
    source: str
    licence: str
    path: Path


@dataclass(frozen=True)
class PlantedOutlier:
    """A record planted by a generator as a contextual outlier of the metric in `cell`
    (attribute → value), with a one-line human description."""

    id: int
    cell: dict[str, str]
    description: str


_SYNTHETIC_LICENCE = "MIT, as part of pcor-sql (synthetic data, no real persons)"

# name → (metric, attributes, description, source, licence); the id column is `id` everywhere.
_CATALOGUE: dict[str, tuple[str, tuple[str, ...], str, str, str]] = {
    "salaries": (
        "salary",
        ("job_title", "employer", "year"),
        "Public-sector pay of $100,000 and more by job title, employer and year, shaped like "
        "Ontario's salary disclosure (PCOR paper §6.1); 36 planted contextual outliers, "
        "record 42 among them.",
        "synthetic: datasets/generate_salaries.py (seeded numpy)",
        _SYNTHETIC_LICENCE,
    ),
    "homicides": (
        "victim_age",
        ("agency_type", "state", "weapon"),
        "Homicide victims' ages by investigating agency type, state and weapon, shaped like "
        "the Murder Accountability Project data (PCOR paper §6.1); 30 planted contextual outliers.",
        "synthetic: datasets/generate_homicides.py (seeded numpy)",
        _SYNTHETIC_LICENCE,
    ),
    "diamonds": (
        "price",
        ("cut", "color", "clarity"),
        "Prices (US$) of 53,940 round-cut diamonds by cut, colour and clarity, with carat, "
        "depth, table and x/y/z dimensions; real data, nothing planted.",
        "ggplot2's diamonds, from the plotnine 0.15.9 wheel on PyPI (datasets/diamonds.SOURCE.md)",
        "MIT (ggplot2: © ggplot2 core developer team; plotnine: © 2022 Hassan Kibirige)",
    ),
}


def _folder() -> Path:
    return shipped_dir("datasets")


def _check_name(name: str) -> str:
    if name not in BUNDLED:
        raise UserError(f"unknown dataset {name!r}", f"use one of: {', '.join(BUNDLED)}")
    return name


def _parquet(name: str) -> Path:
    path = _folder() / f"{_check_name(name)}.parquet"
    if not path.is_file():
        raise InternalError(f"the shipped dataset file {path} is missing")
    return path


@functools.lru_cache(maxsize=None)
def _json(filename: str) -> dict[str, Any]:
    path = _folder() / filename
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InternalError(f"cannot read the shipped file {path}: {exc}") from exc


def declared_domains(name: str) -> dict[str, list[str]]:
    """Each context attribute's declared domain (ordered; includes values absent from the data)."""
    domains = _json("domains.json").get(_check_name(name))
    if domains is None or tuple(domains) != _CATALOGUE[name][1]:
        raise InternalError(f"domains.json does not declare the attributes of {name!r}")
    return {attr: list(values) for attr, values in domains.items()}


def planted_outlier_details(name: str) -> list[PlantedOutlier]:
    """The planted contextual outliers of a dataset, by id (none for real data)."""
    records = _json("planted_outliers.json").get(_check_name(name))
    if records is None:
        raise InternalError(f"planted_outliers.json has no entry for {name!r}")
    return sorted(
        (PlantedOutlier(int(r["id"]), dict(r["cell"]), str(r["description"])) for r in records),
        key=lambda p: p.id,
    )


def planted_outliers(name: str) -> list[int]:
    """Ids of the planted contextual outliers of a dataset, ascending (empty for real data)."""
    return [p.id for p in planted_outlier_details(name)]


def dataset_info(name: str) -> DatasetInfo:
    """The description of one bundled dataset (row count read from the Parquet footer)."""
    import pyarrow.parquet as pq

    path = _parquet(name)
    metric, attributes, description, source, licence = _CATALOGUE[name]
    rows = pq.ParquetFile(path).metadata.num_rows
    return DatasetInfo(name, rows, "id", metric, attributes, description, source, licence, path)


def list_datasets() -> list[DatasetInfo]:
    """All bundled datasets, in BUNDLED order."""
    return [dataset_info(name) for name in BUNDLED]


def enum_type_name(table: str, column: str) -> str:
    """The name of the ENUM type made for `column` of `table` (unquoted)."""
    return f"{table}_{column}"


def load_dataset(
    con: duckdb.DuckDBPyConnection, name: str, *, table_name: str | None = None, replace: bool = False
) -> str:
    """Create table `table_name` (default: the dataset's name) in the connection's current
    schema from the shipped Parquet file, its context attributes cast to ENUM types
    `<table>_<column>` over the declared domains. Returns the table name.

    An existing table or view of that name is an error unless `replace`. An existing ENUM type
    of the same name is reused if it has exactly the declared values, replaced if `replace`,
    and otherwise an error (it belongs to someone else)."""
    require_connection(con, "load_dataset")
    _check_name(name)
    table = table_name if table_name is not None else name
    _create(con, name, table, catalog=None, replace=replace)
    return table


def load_all(con: duckdb.DuckDBPyConnection, *, replace: bool = False) -> list[str]:
    """Load every bundled dataset under its own name; returns the table names."""
    require_connection(con, "load_datasets")
    return [load_dataset(con, name, replace=replace) for name in BUNDLED]


def _create(con: duckdb.DuckDBPyConnection, name: str, table: str, *, catalog: str | None, replace: bool) -> None:
    """Create the ENUM types and the table, in `catalog`'s main schema or (None) the current one.
    Seven statements for a table with three attributes: one look at the catalog, the types, the
    table with its NOT NULL columns, the rows, the comment (a demo run loads one table)."""
    quote_identifier(table)  # refuses empty or NUL-bearing names before anything is created
    domains = declared_domains(name)
    where, existing, types = _catalog_state(con, catalog, table, [enum_type_name(table, c) for c in domains])
    if existing is not None and not replace:
        raise UserError(
            f"a {existing} named {table!r} already exists",
            "pass replace=True (--replace) to overwrite it, or load under another table name",
        )
    if existing is not None:
        con.execute(f"DROP {existing.upper()} {_qualified(where, table)}")

    created: list[str] = []
    try:
        for column, values in domains.items():
            type_name = enum_type_name(table, column)
            labels = types.get(type_name.lower())
            if labels == values:
                continue
            if labels is not None and not replace:
                raise UserError(
                    f"a type named {type_name!r} already exists with other values",
                    "drop it, pass replace=True (--replace), or load under another table name",
                )
            verb = "CREATE OR REPLACE TYPE" if labels is not None else "CREATE TYPE"
            literals = ", ".join(quote_literal(v) for v in values)
            con.execute(f"{verb} {_qualified(where, type_name)} AS ENUM ({literals})")
            if labels is None:
                created.append(type_name)
        # NOT NULL is a catalog fact, not a data fact: it lets a released predicate omit a fully
        # selected attribute and still select exactly the population.
        columns = ", ".join(
            f"{quote_identifier(column)} "
            f"{_qualified(where, enum_type_name(table, column)) if column in domains else sql_type} NOT NULL"
            for column, sql_type in _parquet_columns(_parquet(name))
        )
        casts = ", ".join(
            f"CAST({quote_identifier(column)} AS {_qualified(where, enum_type_name(table, column))}) "
            f"AS {quote_identifier(column)}"
            for column in domains
        )
        select = select_from(f"* REPLACE ({casts})", parquet_file(_parquet(name)), order_by=quote_identifier("id"))
        try:
            con.execute(f"CREATE TABLE {_qualified(where, table)} ({columns})")
            con.execute(f"INSERT INTO {_qualified(where, table)} {select}")
            con.execute(f"COMMENT ON TABLE {_qualified(where, table)} IS {quote_literal(BUNDLED_COMMENT_PREFIX + name)}")
        except duckdb.ConversionException as exc:
            raise InternalError(f"the shipped {name!r} data has a value outside its declared domain: {exc}") from exc
    except BaseException:
        # Leave no half-made dataset behind: the table, and the types this call made.
        con.execute(f"DROP TABLE IF EXISTS {_qualified(where, table)}")
        for type_name in created:
            con.execute(f"DROP TYPE IF EXISTS {_qualified(where, type_name)}")
        raise


#: DuckDB's type for each Arrow type the shipped Parquet files use.
_ARROW_TO_SQL = {"int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "large_string": "VARCHAR"}


def _parquet_columns(path: Any) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a shipped Parquet file, from its footer (no SQL statement)."""
    import pyarrow.parquet as pq

    out = []
    for field in pq.read_schema(path):
        sql_type = _ARROW_TO_SQL.get(str(field.type))
        if sql_type is None:
            raise InternalError(f"the shipped file {path} has a column of unexpected type {field.type}")
        out.append((field.name, sql_type))
    return out


def _catalog_state(con: duckdb.DuckDBPyConnection, catalog: str | None, table: str, type_names: list[str],
                   ) -> tuple[tuple[str, str], str | None, dict[str, list[str]]]:
    """In one statement: (database, schema) the objects go to, 'table'/'view'/None for a relation
    named `table` there (names are case-insensitive), and the labels of existing user types named
    in `type_names` (lower-cased name → labels; [] for a type that is not an ENUM)."""
    # Built-ins qualified, and the catalog's table functions rather than information_schema (SQL
    # views whose bodies call functions by name): a macro in the owner's database named like a
    # built-in would run instead.
    rows = con.execute(
        "WITH here AS (SELECT coalesce($1, system.main.current_database()) AS db,"
        " CASE WHEN $1 IS NULL THEN system.main.current_schema() ELSE 'main' END AS sch)"
        " SELECT here.db, here.sch,"
        " (SELECT system.main.first(kind) FROM (SELECT 'BASE TABLE' AS kind, database_name, schema_name,"
        "  table_name AS name FROM system.main.duckdb_tables() UNION ALL SELECT 'VIEW', database_name, schema_name,"
        "  view_name FROM system.main.duckdb_views()) t WHERE t.database_name = here.db"
        "  AND t.schema_name = here.sch AND system.main.lower(t.name) = system.main.lower($2)),"
        " (SELECT system.main.list(system.main.struct_pack(n := system.main.lower(type_name),"
        "  e := logical_type = 'ENUM', l := labels))"
        "  FROM system.main.duckdb_types() d WHERE d.database_name = here.db AND d.schema_name = here.sch"
        "  AND NOT internal AND system.main.list_contains($3, system.main.lower(type_name)))"
        " FROM here",
        [catalog, table, [t.lower() for t in type_names]],
    ).fetchall()
    database, schema, kind, found = rows[0]
    types = {t["n"]: (list(t["l"]) if t["e"] and t["l"] is not None else []) for t in (found or [])}
    existing = None if kind is None else ("view" if kind == "VIEW" else "table")
    return (database, schema), existing, types


def _qualified(where: tuple[str, str], name: str) -> str:
    return ".".join(quote_identifier(part) for part in (*where, name))


def export_dataset(
    con: duckdb.DuckDBPyConnection | None,
    name: str,
    path: str | Path,
    fmt: str = "parquet",
    *,
    overwrite: bool = False,
) -> Path:
    """Write a bundled dataset to `path` as Parquet (plain strings for the attributes: Parquet
    has no ENUM; the declared domains are in `declared_domains`) or as a DuckDB database file
    holding the table and its ENUM types, exactly as `load_dataset` makes them. Uses `con` for
    the work (a fresh in-memory connection if None) without leaving anything in it. An
    existing file is an error unless `overwrite`. Returns the path written."""
    _check_name(name)
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"unknown export format {fmt!r}", f"use one of: {', '.join(EXPORT_FORMATS)}")
    target = Path(path)
    if target.exists():
        if not overwrite:
            raise UserError(f"{target} already exists", "pass overwrite=True (--overwrite) or choose another path")
        if target.is_dir():
            raise UserError(f"{target} is a directory", "give a file path")
        target.unlink()
        if fmt == "duckdb":
            Path(f"{target}.wal").unlink(missing_ok=True)
    if not target.parent.is_dir():
        raise UserError(f"the folder {target.parent} does not exist", "create it first or choose another path")

    own = con is None
    work = duckdb.connect() if con is None else con
    try:
        if fmt == "parquet":
            rows = select_from("*", parquet_file(_parquet(name)))
            work.execute(
                f"COPY ({rows}) TO {quote_literal(str(target))} "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
        else:
            alias = "pcor_sql_export"
            work.execute(f"ATTACH {quote_literal(str(target))} AS {quote_identifier(alias)}")
            try:
                _create(work, name, name, catalog=alias, replace=False)
            finally:
                work.execute(f"DETACH {quote_identifier(alias)}")
    finally:
        if own:
            work.close()
    return target
