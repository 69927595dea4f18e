"""Which layout a database's ledger has: current, absent, older (migrate it), or damaged.

The current layout is what sql/ledger.sql makes; it is read from that script itself (run once
per process on a scratch in-memory database), so a column added there is expected everywhere
at once and `migrate` knows how to fill it (its DEFAULT, else NULL). Older layouts:
- before schema `pcor` (pcor-sql ≤ 0.x): `pcor_budget` and `pcor_release_history` in the
  database's current schema, budgets per "dataset" (a name or a relation's key);
- schema `pcor` without the outcome, analyst and process columns of `pcor.history` and
  without `pcor.analysts` and `pcor.quotas`;
- any `pcor` table missing a column (a hand edit): refused the same way, since reading it
  would fail, or — worse — a charge could be written without its history.
A ledger with columns this version does not know was written by a newer version: refused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import duckdb

from pcor_sql.errors import UserError, from_python
from pcor_sql.resources import sql_text

#: Where a connection's ledger lives when it is kept with the data (the connection's default
#: database: a fresh cursor starts there whatever `USE` did), its file, whether it is
#: read-only, and (schema, table, column count) of its `pcor` tables and of a pre-`pcor`
#: ledger's — one scan of duckdb_tables(); the columns' names are read only when the counts
#: are not the current layout's (`COLUMNS_SQL`), since duckdb_columns() costs about half as
#: much again as the whole location query.
LOCATION_SQL = (
    "SELECT d.database_name, d.path, d.readonly,"
    " (SELECT system.main.list(system.main.row(t.schema_name, t.table_name, t.column_count)"
    " ORDER BY t.schema_name, t.table_name)"
    " FROM system.main.duckdb_tables() t WHERE t.database_name = d.database_name"
    " AND (t.schema_name = 'pcor' OR t.table_name IN ('pcor_budget', 'pcor_release_history')))"
    " FROM system.main.duckdb_databases() d WHERE d.database_name = system.main.current_database()"
)
COLUMNS_SQL = ("SELECT table_name, column_name FROM system.main.duckdb_columns() WHERE database_name = $1 AND schema_name = 'pcor'"
               " ORDER BY table_name, column_index")

LEGACY_TABLES = ("pcor_budget", "pcor_release_history")


def migrate_fix() -> str:
    """The fix of an older layout, spelled for the caller (the command line, or Python)."""
    how = "Owner.migrate_ledger() (`pcor-sql budget migrate`)" if from_python() else "`pcor-sql budget migrate`"
    return f"migrate it with {how}: spent ε, limits and history are kept"


@dataclass(frozen=True)
class Column:
    name: str
    nullable: bool
    default: str | None


@functools.cache
def expected_layout() -> dict[str, tuple[Column, ...]]:
    """The tables and columns sql/ledger.sql makes, in order."""
    scratch = duckdb.connect()
    try:
        scratch.execute(sql_text("ledger.sql"))
        rows = scratch.execute(
            "SELECT table_name, column_name, is_nullable, column_default FROM duckdb_columns()"
            " WHERE schema_name = 'pcor' ORDER BY table_name, column_index").fetchall()
    finally:
        scratch.close()
    out: dict[str, list[Column]] = {}
    for table, column, nullable, default in rows:
        out.setdefault(table, []).append(Column(column, bool(nullable), default))
    return {table: tuple(columns) for table, columns in out.items()}


@dataclass(frozen=True)
class Layout:
    """What a database holds of a ledger: `columns` of each `pcor` table present, and the
    `schema.table` names of a pre-`pcor` ledger."""

    columns: dict[str, tuple[str, ...]]
    legacy: tuple[str, ...]

    @classmethod
    def from_location(cls, tables: object, columns: Callable[[], list[tuple]], *, exact: bool = False) -> "Layout":
        """The layout from LOCATION_SQL's list of (schema, table, column count); `columns()`
        reads COLUMNS_SQL's rows, called only when the counts are not the current layout's, or
        when `exact` (a column renamed by hand keeps the count: reading fails then, as damage)."""
        pcor, legacy = {}, []
        for entry in tables or []:  # type: ignore[union-attr]
            schema, table, count = entry.values() if isinstance(entry, dict) else entry
            if schema == "pcor":
                pcor[table] = count
            elif table in LEGACY_TABLES:
                legacy.append(f"{schema}.{table}")
        expected = expected_layout()
        if not exact and not legacy and all(pcor.get(t) == len(c) for t, c in expected.items()):
            return cls({t: tuple(col.name for col in c) for t, c in expected.items()}, ())
        found: dict[str, list[str]] = {}
        for table, column in (columns() if pcor else []):
            found.setdefault(table, []).append(column)
        return cls({t: tuple(c) for t, c in found.items()}, tuple(legacy))

    @property
    def absent(self) -> bool:
        """No ledger at all (nothing of the current or an older layout)."""
        return not self.legacy and not any(t in expected_layout() for t in self.columns)

    def missing(self) -> dict[str, tuple[str, ...]]:
        """Each expected table that is absent (all its columns) or lacks columns."""
        out = {}
        for table, columns in expected_layout().items():
            lacking = tuple(c.name for c in columns if c.name not in self.columns.get(table, ()))
            if lacking:
                out[table] = lacking
        return out

    def unknown(self) -> dict[str, tuple[str, ...]]:
        """Columns of expected tables that this version does not know (a newer version's)."""
        expected = expected_layout()
        out = {}
        for table, columns in self.columns.items():
            if table in expected:
                known = {c.name for c in expected[table]}
                extra = tuple(c for c in columns if c not in known)
                if extra:
                    out[table] = extra
        return out

    @property
    def newer(self) -> bool:
        """Columns this version does not know and none missing: a newer version's ledger (a
        newer version only adds columns; unknown and missing ones together are damage, which
        `migrate` mends, dropping the unknown ones)."""
        return bool(self.unknown()) and not self.missing() and not self.legacy

    @property
    def current(self) -> bool:
        return not self.legacy and not self.missing() and not self.unknown()

    def problem(self, label: str) -> UserError | None:
        """The one-line refusal for a ledger that is not in the current layout (None if it is,
        or if there is no ledger yet)."""
        if self.absent or self.current:
            return None
        if self.newer:
            table, extra = next(iter(self.unknown().items()))
            return UserError(
                f"the budget ledger of {label} was written by a newer pcor-sql (pcor.{table} has {', '.join(extra)})",
                "use that version of pcor-sql (or newer) on it")
        if self.legacy:
            return UserError(
                f"{label} holds a budget ledger in an older layout ({', '.join(self.legacy)}), which this version"
                " would ignore", migrate_fix())
        lacking = [f"pcor.{t} lacks {', '.join(c)}" if t in self.columns else f"pcor.{t} is missing"
                   for t, c in self.missing().items()]
        return UserError(f"the budget ledger of {label} is in an older or damaged layout ({'; '.join(lacking)})",
                         migrate_fix())
