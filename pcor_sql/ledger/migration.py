"""`pcor-sql budget migrate`: a ledger in an older layout brought to the current one, in one
transaction, keeping every unit's spent ε, its limit and its history (`layout` says which
layouts there are).

- `pcor` tables missing columns (an older version, or a hand edit) are rebuilt: renamed, made
  again by sql/ledger.sql, and their rows copied back, a missing column taking its DEFAULT,
  else NULL, else a value derived from the row (`FILLS`). A column nothing can fill (a unit's
  name, a charge's ε) makes the migration refuse: restore the ledger from a backup.
- A pre-`pcor` ledger (`pcor_budget`, `pcor_release_history`) kept budgets per name. Each name
  moves to the units it spells here (resolved by the caller, `Owner.migrate_ledger`), or stays
  a unit of its own name. Its history rows are copied to each unit (outcome 'charged'); if its
  spent exceeded its history, one row 'migrated (spent without history)' holds the rest, so
  spent is kept and still equals the history. Limits are kept (the smaller, where a unit gets
  two). The old tables are then dropped.
Spent is never lowered: each unit's total grows by exactly the ε of the rows added to it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pcor_sql.errors import UserError
from pcor_sql.ledger.charge_rules import RELATIVE_SLACK, Tables, add_compensated
from pcor_sql.ledger.layout import Layout, expected_layout
from pcor_sql.ledger.transactions import utc_now
from pcor_sql.resources import sql_text
from pcor_sql.sqltext.quoting import quote_identifier

#: Values for a missing NOT NULL column without a DEFAULT, from the rest of its row.
FILLS = {
    "created_at": "system.main.now()::TIMESTAMP",
    "updated_at": "system.main.now()::TIMESTAMP",
    "released_at": "system.main.now()::TIMESTAMP",
    "seq": "system.main.row_number() OVER (PARTITION BY unit, notion ORDER BY released_at)",
    "spent_after": "system.main.sum(epsilon) OVER (PARTITION BY unit, notion ORDER BY released_at ROWS UNBOUNDED PRECEDING)",
    "seeded": "false",
    "role": "'owner'",
    "mechanism": "'unknown'",
    "public": "false",
}
_KEY = re.compile(r"(?P<slug>.+)#(?P<digest>[0-9a-f]{16})\Z")


def legacy_relation(name: str) -> str | None:
    """The relation an old ledger's key `slug#digest` was made from, when it was a plain name
    (the digest is the SHA-256 of the relation's normalised text, which for a plain name is
    the slug itself): `salaries#…` → `salaries`; else None."""
    match = _KEY.match(name)
    if match and hashlib.sha256(match["slug"].encode("utf-8")).hexdigest()[:16] == match["digest"]:
        return match["slug"]
    return None


@dataclass(frozen=True)
class MigrationReport:
    rebuilt: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    legacy: tuple[str, ...] = ()
    moved: tuple[tuple[str, tuple[str, ...]], ...] = ()
    kept: tuple[str, ...] = ()
    changed: bool = field(default=True)
    #: How many (unit, notion) histories got their hash chain built.
    chained: int = 0

    def lines(self) -> list[str]:
        if not self.changed:
            return ["the ledger is in the current layout: nothing to migrate"]
        out = [f"rebuilt pcor.{t} (columns added)" for t in self.rebuilt]
        out += [f"created pcor.{t}" for t in self.created]
        out += [f"moved {name!r} (from {', '.join(self.legacy)}) to {', '.join(units)}" for name, units in self.moved]
        out += [f"kept {name!r} as a unit of its own name: it spells no table or file here" for name in self.kept]
        out += [f"dropped {t}" for t in self.legacy]
        if self.chained:
            out.append(f"built the hash chain of {self.chained} unit histor{'y' if self.chained == 1 else 'ies'}")
        return out + ["migrated: spent ε, limits and history kept (pcor-sql budget verify checks them)"]


def read_legacy(read: Callable[[str, list[object]], list[tuple]], layout: Layout, database: str,
                resolve: Callable[[str], Any] | None) -> tuple[dict[str, list[dict]], dict[str, tuple[str, ...]]]:
    """The rows of the old tables, by `schema.table`, as dicts, and the units each old budget
    name spells (by `resolve`) — read before the migration's transaction, so that names are
    resolved against the catalog outside it."""
    out = {}
    for name in layout.legacy:
        schema, table = name.split(".", 1)
        columns = [c for (c,) in read("SELECT column_name FROM system.main.duckdb_columns() WHERE database_name = $1 AND"
                                      " schema_name = $2 AND table_name = $3 ORDER BY column_index",
                                      [database, schema, table])]
        qualified = f"{quote_identifier(database)}.{quote_identifier(schema)}.{quote_identifier(table)}"
        out[name] = [dict(zip(columns, row)) for row in read(f"SELECT * FROM {qualified}", [])]
    names = sorted({r["dataset"] for rows in out.values() for r in rows})
    return out, {name: tuple(resolve(name)) if resolve else () for name in names}


def migrate(cur: Any, tables: Tables, database: str, layout: Layout, legacy_rows: dict[str, list[dict]],
            units_of: dict[str, tuple[str, ...]]) -> MigrationReport:
    """The body of the migration's transaction (see the module docstring)."""
    expected = expected_layout()
    missing, unknown = layout.missing(), layout.unknown()
    rebuild = {t: missing.get(t, ()) for t in expected if t in layout.columns and (t in missing or t in unknown)}
    created = tuple(t for t in expected if t not in layout.columns)
    for table, lacking in rebuild.items():
        columns = {c.name: c for c in expected[table]}
        for name in lacking:
            if not columns[name].nullable and columns[name].default is None and name not in FILLS:
                raise UserError(f"the budget ledger cannot be migrated: pcor.{table} lacks column {name}, which"
                                " nothing can fill", "restore the ledger from a backup")
        if table == "history":  # DuckDB renames no table an index depends on; sql/ledger.sql makes it again
            cur.execute(f"DROP INDEX IF EXISTS {tables.prefix}history_release_id")
        cur.execute(f"ALTER TABLE {getattr(tables, table)} RENAME TO {quote_identifier(table + '__before_migration')}")
    cur.execute(f"USE {quote_identifier(database)}")
    cur.execute(sql_text("ledger.sql"))
    for table, lacking in rebuild.items():
        old = f"{tables.prefix}{quote_identifier(table + '__before_migration')}"
        kept = [c.name for c in expected[table] if c.name not in lacking]
        filled = [c.name for c in expected[table] if c.name in lacking and c.default is None and not c.nullable]
        names = ", ".join(quote_identifier(c) for c in kept + filled)
        values = ", ".join([quote_identifier(c) for c in kept] + [FILLS[c] for c in filled])
        cur.execute(f"INSERT INTO {getattr(tables, table)} ({names}) SELECT {values} FROM {old}")
        cur.execute(f"DROP TABLE {old}")
    moved, kept_names = _move_legacy(cur, tables, database, legacy_rows, units_of)
    # The store then builds the chain of a history without one (DESIGN.md §11), in this transaction.
    return MigrationReport(tuple(rebuild), created, tuple(legacy_rows), moved, kept_names)


def _move_legacy(cur: Any, t: Tables, database: str, legacy_rows: dict[str, list[dict]],
                 units_of: dict[str, tuple[str, ...]]) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    budgets = [r for name, rows in legacy_rows.items() if name.endswith(".pcor_budget") for r in rows]
    history = [r for name, rows in legacy_rows.items() if name.endswith(".pcor_release_history") for r in rows]
    names = sorted({r["dataset"] for r in budgets} | {r["dataset"] for r in history})
    rows_by_unit: dict[str, list[dict]] = {}
    limits: dict[str, float] = {}
    for name in names:
        own = [r for r in history if r["dataset"] == name]
        budget = next((r for r in budgets if r["dataset"] == name), {})
        missing = (budget.get("spent_epsilon") or 0.0) - math.fsum(r["epsilon"] for r in own)
        if missing > RELATIVE_SLACK * max(budget.get("spent_epsilon") or 0.0, 1e-300):
            own = own + [{"release_id": f"migrated:{name}", "released_at": budget.get("updated_at") or utc_now(),
                          "mechanism": "migrated (spent without history)", "epsilon": missing,
                          "record_key": None, "statement": None}]
        for unit in units_of.get(name) or (name,):
            rows_by_unit.setdefault(unit, []).extend(own)
            if budget.get("limit_epsilon") is not None:
                limits[unit] = min(limits.get(unit, math.inf), budget["limit_epsilon"])
    now = utc_now()
    for unit, rows in sorted(rows_by_unit.items()):
        found = cur.execute(f"SELECT spent_epsilon, spent_residual, releases, limit_epsilon FROM {t.budget}"
                            " WHERE unit = $1 AND notion = 'ocdp'", [unit]).fetchall()
        spent, residual, releases, limit = found[0] if found else (0.0, 0.0, 0, None)
        rows = sorted(rows, key=lambda r: r["released_at"])
        fresh = []
        for row in rows:
            taken = cur.execute(f"SELECT system.main.count(*) FROM {t.history} WHERE release_id = $1 AND unit = $2",
                                [row["release_id"], unit]).fetchall()[0][0]
            if not taken:
                fresh.append(row)
        running = spent
        for j, row in enumerate(fresh):
            running, residual = add_compensated(running, residual, row["epsilon"])
            cur.execute(
                f"INSERT INTO {t.history} (release_id, unit, notion, seq, released_at, mechanism, epsilon, record_key,"
                " statement, spent_after, seeded, role) VALUES ($1, $2, 'ocdp', $3, $4, $5, $6, $7, $8, $9, false, 'owner')",
                [row["release_id"], unit, releases + 1 + j, row["released_at"], row["mechanism"], row["epsilon"],
                 row.get("record_key"), row.get("statement"), running])
        new_limit = min((x for x in (limit, limits.get(unit)) if x is not None), default=None)
        cur.execute(
            f"INSERT INTO {t.budget} (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
            " updated_at) VALUES ($1, 'ocdp', $2, $3, $4, $5, $6, $6) ON CONFLICT (unit, notion) DO UPDATE SET"
            " limit_epsilon = excluded.limit_epsilon, spent_epsilon = excluded.spent_epsilon,"
            " spent_residual = excluded.spent_residual, releases = excluded.releases, updated_at = excluded.updated_at",
            [unit, new_limit, running, residual, releases + len(fresh), now])
    for name in legacy_rows:
        schema, table = name.split(".", 1)
        cur.execute(f"DROP TABLE {quote_identifier(database)}.{quote_identifier(schema)}.{quote_identifier(table)}")
    moved = tuple((n, units_of[n]) for n in names if units_of.get(n))
    return moved, tuple(n for n in names if not units_of.get(n))
