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

import duckdb

from pcor_sql.errors import UserError, from_python
from pcor_sql.resources import sql_text

#: Where a connection's ledger lives when it is kept with the data (the connection's default
#: database: a fresh cursor starts there whatever `USE` did), its file, whether it is
#: read-only, the columns of its `pcor` tables, and the tables of a pre-`pcor` ledger.
LOCATION_SQL = (
    "SELECT d.database_name, d.path, d.readonly,"
    " (SELECT list((c.table_name, c.column_name)) FROM duckdb_columns() c"
    " WHERE c.database_name = d.database_name AND c.schema_name = 'pcor'),"
    " (SELECT list(t.schema_name || '.' || t.table_name ORDER BY t.schema_name, t.table_name) FROM duckdb_tables() t"
    " WHERE t.database_name = d.database_name AND t.table_name IN ('pcor_budget', 'pcor_release_history'))"
    " FROM duckdb_databases() d WHERE d.database_name = current_database()"
)

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
    def from_location(cls, columns: object, legacy: object) -> "Layout":
        found: dict[str, list[str]] = {}
        for entry in columns or []:  # type: ignore[union-attr]
            table, column = entry.values() if isinstance(entry, dict) else entry
            found.setdefault(table, []).append(column)
        return cls({t: tuple(c) for t, c in found.items()}, tuple(legacy or []))  # type: ignore[arg-type]

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
    def current(self) -> bool:
        return not self.legacy and not self.missing() and not self.unknown()

    def problem(self, label: str) -> UserError | None:
        """The one-line refusal for a ledger that is not in the current layout (None if it is,
        or if there is no ledger yet)."""
        if self.absent or self.current:
            return None
        if self.unknown():
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
