"""The DuckDB store's SQL of a charge, its outcome and the history's check (`store_interface`).

The ledger lives in the owner's database, so its SQL names its tables in full and calls every
built-in as `system.main.<name>`, with no operator, list literal or row tuple (each a function
looked up by name): a macro such as `count_star() AS 0` would otherwise read "no limit
anywhere", or `fsum` hide a lost charge (tests/engine/test_shadowing_macros.py). `unnest` stays
bare: DuckDB binds it before any macro.

A charge reads everything it needs in one SELECT: a UNION ALL of rows of one shape (tag, name,
x, y, z, n, names), each tagged with what it is — under half the time of the same answers as
scalar subqueries, a third of a join's (measured on the service's light requests, where the
charge is the one thing every request waits on in turn). Its writes are one INSERT of the
history rows and one UPDATE of the budget rows (an upsert when one is new), whatever the number
of units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcor_sql.ledger.charge_reads import by_tag
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, Tables
from pcor_sql.ledger.duckdb_leases import running_holders
from pcor_sql.ledger.history_chain import FIELDS
from pcor_sql.ledger.store_interface import HISTORY_FIXED_COLUMNS, HISTORY_ROW_COLUMNS
from pcor_sql.ledger.transactions import utc_now


_FIELDS = ", ".join(FIELDS)
_UNIT, _NOTION, _EPSILON, _ANALYST = (FIELDS.index(n) for n in ("unit", "notion", "epsilon", "analyst"))
#: The history's columns that a charge writes and that are not VARCHAR (`append_history`).
_HISTORY_TYPES = {"seq": "BIGINT", "epsilon": "DOUBLE", "k": "BIGINT", "spent_after": "DOUBLE", "seeded": "BOOLEAN"}


def _budget_parts(t: Tables) -> list[str]:
    """'b', 'p' and 's' over $1 (units) and $2 (notion)."""
    return [
        f"SELECT 'b' AS tag, unit AS name, limit_epsilon AS x, spent_epsilon AS y, spent_residual AS z,"
        f" releases AS n, NULL::VARCHAR[] AS names FROM {t.budget}"
        f" WHERE notion = $2 AND system.main.list_contains($1::VARCHAR[], unit)",
        f"SELECT 'p', unit, NULL, NULL, NULL, NULL, NULL FROM {t.units}"
        f" WHERE public AND system.main.list_contains($1::VARCHAR[], unit)",
        f"SELECT 's', name, value, NULL, NULL, NULL, NULL FROM {t.settings}"
        f" WHERE system.main.starts_with(name, 'default_limit_') OR name = '{NEEDS_REPAIR}'",
    ]


def _quota_parts(t: Tables, analyst: str, datasets: str) -> tuple[str, str]:
    """'a' and 'q' over the parameters `analyst`, `datasets` and $2 (the notion)."""
    return (f"SELECT 'a', name, NULL, NULL, NULL, CASE WHEN revoked_at IS NULL THEN 0 ELSE 1 END, datasets"
            f" FROM {t.analysts} WHERE name = {analyst}",
            f"SELECT 'q', dataset, limit_epsilon, spent_epsilon, spent_residual, releases, NULL FROM {t.quotas}"
            f" WHERE analyst = {analyst} AND notion = $2 AND system.main.list_contains({datasets}::VARCHAR[], dataset)")


def _tagged(cur: Any, parts: Sequence[str], params: Sequence[object]) -> dict[str, list[tuple]]:
    return by_tag(cur.execute(" UNION ALL ".join(parts), list(params)).fetchall())


def _by_position(key: str, *columns: tuple[str, int, str]) -> str:
    """SET clauses giving each row the value at its key's position in parameter lists: `key`'s
    list is $1 for the budget and $3 for the quotas, each column's list the parameter it names.
    A join with unnested lists costs a third more."""
    first = "$1" if key == "unit" else "$3"
    at = f"system.main.list_position({first}::VARCHAR[], {key})"
    return ", ".join(f"{name} = system.main.list_extract(${n}::{kind}[], {at})" for name, n, kind in columns)


def _unit_sums(t: Tables) -> str:
    return (f"SELECT unit, notion, coalesce(system.main.fsum(epsilon) FILTER (WHERE NOT refunded), 0) AS kept,"
            f" system.main.fsum(epsilon) AS gross, system.main.count(*) AS rows FROM {t.history} GROUP BY unit, notion")


def _analyst_sums(t: Tables) -> str:
    releases = (f"SELECT analyst, notion, coalesce(dataset, '') AS dataset, release_id, system.main.max(epsilon) AS eps,"
                f" system.main.bool_or(refunded) AS refunded FROM {t.history} WHERE analyst IS NOT NULL GROUP BY ALL")
    return (f"SELECT analyst, notion, d AS dataset, coalesce(system.main.fsum(eps) FILTER (WHERE NOT refunded), 0) AS kept,"
            f" system.main.fsum(eps) AS gross, system.main.count(*) AS rows FROM (SELECT *, unnest(CASE WHEN dataset = ''"
            f" THEN system.main.list_value('') ELSE system.main.list_value('', dataset) END) AS d FROM ({releases})) GROUP BY ALL")


def _mismatch_sql(t: Tables, slack: float) -> str:
    return (
        f"SELECT label, notion, spent, kept FROM ("
        f" SELECT unit AS label, notion, coalesce(system.main.\"+\"(b.spent_epsilon, b.spent_residual), 0) AS spent,"
        f" coalesce(h.kept, 0) AS kept, coalesce(h.gross, 0) AS gross"
        f" FROM {t.budget} b FULL JOIN ({_unit_sums(t)}) h USING (unit, notion)"
        f" UNION ALL"
        f" SELECT system.main.concat('analyst:', analyst, CASE WHEN dataset = '' THEN '' ELSE system.main.concat('/', dataset) END),"
        f" notion, coalesce(system.main.\"+\"(q.spent_epsilon, q.spent_residual), 0), coalesce(h.kept, 0), coalesce(h.gross, 0)"
        f" FROM {t.quotas} q FULL JOIN ({_analyst_sums(t)}) h USING (analyst, notion, dataset)"
        f") WHERE system.main.abs(system.main.\"-\"(spent, kept))"
        f" > system.main.\"*\"({float(slack)!r}, system.main.greatest(gross, spent)) ORDER BY label, notion"
    )


def _rows(found: Any) -> list[tuple]:
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in found or []]


class DuckDBChargeOps:
    """The charge, outcome and consistency parts of `DuckDBOps` (a cursor `cur`, tables `t`)."""

    cur: Any
    t: Tables
    written: Any = None  # duckdb_chain_memory.Written of the transaction, if any

    def charge_rows(self, units, notion, ids, analyst, datasets):
        t = self.t
        parts = [*_budget_parts(t),
                 f"(SELECT 'l', NULL, NULL, NULL, NULL, NULL, NULL FROM {t.budget} WHERE limit_epsilon IS NOT NULL LIMIT 1)",
                 f"SELECT 'h', release_id, epsilon, NULL, NULL, NULL, system.main.list_value(unit) FROM {t.history}"
                 f" WHERE system.main.list_contains($3::VARCHAR[], release_id)"]
        params: list[object] = [list(units), notion, list(ids)]
        if analyst is not None:  # the analyst's rows in the same SELECT: one statement less in the transaction
            parts += _quota_parts(t, "$4", "$5")
            params += [analyst, list(datasets)]
        return _tagged(self.cur, parts, params)

    def fit_rows(self, units, notion, analyst, datasets):
        t = self.t
        return _tagged(self.cur, [*_budget_parts(t), _quota_parts(t, "$3", "$4")[1]],
                       [list(units), notion, analyst, list(datasets)])

    def append_history(self, fixed, columns):
        names = list(HISTORY_ROW_COLUMNS)
        values = [columns[n] for n in names]
        if len(values[0]) == 1:
            # One row (a lone request of one unit: the service's common case): scalar parameters.
            # Each unnest of a list parameter costs DuckDB ~0.1 ms (12 of them here), under the write lock.
            shape, params = ", ".join(f"${i + 8}::{_HISTORY_TYPES.get(n, 'VARCHAR')}" for i, n in enumerate(names)), \
                [*fixed, *(v[0] for v in values)]
        else:
            shape, params = ", ".join(f"unnest(${i + 8}::{_HISTORY_TYPES.get(n, 'VARCHAR')}[])"
                                      for i, n in enumerate(names)), [*fixed, *values]
        # The rows as stored come back (RETURNING): the chain's append then reads nothing (`duckdb_chain_memory`).
        written = self.cur.execute(
            f"INSERT INTO {self.t.history} ({', '.join(HISTORY_FIXED_COLUMNS)}, {', '.join(names)})"
            f" SELECT $1, $2, $3, $4, $5::BIGINT, $6, $7, {shape} RETURNING {_FIELDS}", params).fetchall()
        if self.written is not None:
            self.written.note_rows(written)

    def update_budgets(self, notion, units, spent, residual, releases, now, stored):
        budget = self.t.budget
        if stored:
            # Rows the transaction read: one UPDATE (a third of the upsert's time). A row deleted
            # meanwhile by a committed writer is a conflict (the body runs again).
            if len(units) == 1:  # the common case: an equality the primary key answers
                [(changed,)] = self.cur.execute(
                    f"UPDATE {budget} SET spent_epsilon = $3, spent_residual = $4, releases = $5, updated_at = $6"
                    " WHERE unit = $1 AND notion = $2", [units[0], notion, spent[0], residual[0], releases[0], now]
                ).fetchall()
                return changed
            values = _by_position("unit", ("spent_epsilon", 3, "DOUBLE"), ("spent_residual", 4, "DOUBLE"),
                                  ("releases", 5, "BIGINT"))
            [(changed,)] = self.cur.execute(
                f"UPDATE {budget} SET {values}, updated_at = $6"
                " WHERE notion = $2 AND system.main.list_contains($1::VARCHAR[], unit)",
                [units, notion, spent, residual, releases, now]).fetchall()
            return changed
        # Some row is new: one upsert (a new unit without a limit; an existing one keeps its limit).
        self.cur.execute(
            f"INSERT INTO {budget} (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases,"
            " created_at, updated_at) SELECT unnest($1::VARCHAR[]), $2, NULL, unnest($3::DOUBLE[]),"
            " unnest($4::DOUBLE[]), unnest($5::BIGINT[]), $6, $6 ON CONFLICT (unit, notion) DO UPDATE SET"
            " spent_epsilon = excluded.spent_epsilon, spent_residual = excluded.spent_residual,"
            " releases = excluded.releases, updated_at = excluded.updated_at",
            [units, notion, spent, residual, releases, now])
        return None

    def update_quotas(self, analyst, notion, datasets, spent, residual, releases, now, stored):
        quotas = self.t.quotas
        if stored:
            values = _by_position("dataset", ("spent_epsilon", 4, "DOUBLE"), ("spent_residual", 5, "DOUBLE"),
                                  ("releases", 6, "BIGINT"))
            [(changed,)] = self.cur.execute(
                f"UPDATE {quotas} SET {values}, updated_at = $7"
                " WHERE analyst = $1 AND notion = $2 AND system.main.list_contains($3::VARCHAR[], dataset)",
                [analyst, notion, datasets, spent, residual, releases, now]).fetchall()
            return changed
        self.cur.execute(
            f"INSERT INTO {quotas} (analyst, notion, dataset, limit_epsilon, spent_epsilon, spent_residual,"
            " releases, updated_at) SELECT $1, $2, unnest($3::VARCHAR[]), NULL, unnest($4::DOUBLE[]),"
            " unnest($5::DOUBLE[]), unnest($6::BIGINT[]), $7 ON CONFLICT (analyst, notion, dataset) DO UPDATE SET"
            " spent_epsilon = excluded.spent_epsilon, spent_residual = excluded.spent_residual,"
            " releases = excluded.releases, updated_at = excluded.updated_at",
            [analyst, notion, datasets, spent, residual, releases, now])
        return None

    def set_outcome(self, ids, outcome, reason, refunded, now):
        ids = list(ids)
        # One id (a lone request: the service's common case) is an equality the history's index answers.
        match = "release_id = $5::VARCHAR" if len(ids) == 1 else "release_id IN (SELECT unnest($5::VARCHAR[]))"
        changed = self.cur.execute(
            f"UPDATE {self.t.history} SET outcome = $1, reason = $2, refunded = $3, finished_at = $4"
            f" WHERE {match} AND outcome = 'running' RETURNING {_FIELDS}",
            [outcome, reason, bool(refunded), now, ids[0] if len(ids) == 1 else ids]).fetchall()
        if self.written is not None:  # a release's rows change together: these are all of them
            self.written.note_rows(changed)
        return [(r[_UNIT], r[_NOTION], r[_EPSILON], r[_ANALYST]) for r in changed]

    def budget_spent(self, notion, units):
        return self.cur.execute(
            f"SELECT unit, spent_epsilon, spent_residual FROM {self.t.budget}"
            " WHERE notion = $1 AND unit IN (SELECT unnest($2::VARCHAR[]))", [notion, list(units)]).fetchall()

    def set_budget_spent(self, notion, units, spent, residual, now):
        self.cur.execute(
            f"UPDATE {self.t.budget} AS b SET spent_epsilon = v.s, spent_residual = v.r, updated_at = $5"
            " FROM (SELECT unnest($1::VARCHAR[]) AS u, unnest($2::DOUBLE[]) AS s, unnest($3::DOUBLE[]) AS r) AS v"
            " WHERE b.unit = v.u AND b.notion = $4", [units, spent, residual, notion, now])

    def history_of(self, ids):
        return self.cur.execute(
            f"SELECT release_id, unit, notion, epsilon, refunded, spent_after FROM {self.t.history}"
            " WHERE release_id IN (SELECT unnest($1::VARCHAR[])) ORDER BY unit, notion, seq", [list(ids)]).fetchall()

    def set_spent_after(self, ids, units, notions, values):
        if self.written is not None:
            self.written.forget_rows()
        self.cur.execute(
            f"UPDATE {self.t.history} AS h SET spent_after = v.s FROM (SELECT unnest($1::VARCHAR[]) AS r,"
            " unnest($2::VARCHAR[]) AS u, unnest($3::VARCHAR[]) AS n, unnest($4::DOUBLE[]) AS s) AS v"
            " WHERE h.release_id = v.r AND h.unit = v.u AND h.notion = v.n", [ids, units, notions, values])

    def mark_interrupted(self, host, keys, now):
        if self.written is not None:
            self.written.forget_rows()
        changed = self.cur.execute(
            f"UPDATE {self.t.history} SET outcome = 'interrupted', reason = 'process ended', finished_at = $1"
            " WHERE outcome = 'running' AND host = $2 AND system.main.list_contains($3::VARCHAR[],"
            " system.main.concat(pid::VARCHAR, ':', coalesce(process_token, ''))) RETURNING release_id",
            [now, host, keys]).fetchall()
        return sorted({rid for (rid,) in changed})

    def mismatches(self, slack):
        [(found,)] = self.cur.execute(f"SELECT system.main.list(system.main.row(label, notion, spent, kept)) FROM"
                                      f" ({_mismatch_sql(self.t, slack)})").fetchall()
        return _rows(found)

    def open_state(self, slack):
        t = self.t
        [(found, running, flagged)] = self.cur.execute(
            f"SELECT (SELECT system.main.list(system.main.row(label, notion, spent, kept)) FROM ({_mismatch_sql(t, slack)})),"
            f" ({running_holders(t)}), (SELECT value FROM {t.settings} WHERE name = '{NEEDS_REPAIR}')",
            [utc_now()]).fetchall()
        return _rows(found), _rows(running), flagged

    def reset_totals(self, now):
        t, cur = self.t, self.cur
        cur.execute(
            f"INSERT INTO {t.budget} (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
            f" updated_at) SELECT unit, notion, NULL, kept, 0, rows, $1, $1 FROM ({_unit_sums(t)})"
            " ON CONFLICT (unit, notion) DO UPDATE SET spent_epsilon = excluded.spent_epsilon, spent_residual = 0,"
            " releases = excluded.releases, updated_at = excluded.updated_at", [now])
        cur.execute(
            f"UPDATE {t.budget} AS b SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
            f" WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM {t.history} h"
            f" WHERE h.unit = b.unit AND h.notion = b.notion)", [now])
        cur.execute(
            f"INSERT INTO {t.quotas} (analyst, notion, dataset, limit_epsilon, spent_epsilon, spent_residual, releases,"
            f" updated_at) SELECT analyst, notion, dataset, NULL, kept, 0, rows, $1 FROM ({_analyst_sums(t)})"
            " ON CONFLICT (analyst, notion, dataset) DO UPDATE SET spent_epsilon = excluded.spent_epsilon,"
            " spent_residual = 0, releases = excluded.releases, updated_at = excluded.updated_at", [now])
        cur.execute(
            f"UPDATE {t.quotas} AS q SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
            f" WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM {t.history} h"
            f" WHERE h.analyst = q.analyst AND h.notion = q.notion AND (q.dataset = '' OR h.dataset = q.dataset))", [now])

    def set_setting(self, name, value, now):
        self.cur.execute(
            f"INSERT INTO {self.t.settings} (name, value, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [name, value, now])

    def delete_setting(self, name):
        self.cur.execute(f"DELETE FROM {self.t.settings} WHERE name = $1", [name])
