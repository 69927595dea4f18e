"""The PostgreSQL store's SQL of a charge, its outcome and the history's check
(`store_interface.LedgerOps`; the store itself is `postgres_store`). Statements are written with
$1, $2, ... placeholders (and never a literal %), turned into psycopg's named ones by `run`; lists travel as arrays
(`= ANY($1::text[])`, `unnest(...)` with several arrays side by side).

A charge reads everything it needs in one SELECT, a UNION ALL of rows of one shape (tag, name,
x, y, z, n, names) as the embedded store does, in the charge's SERIALIZABLE transaction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pcor_sql.ledger.charge_reads import by_tag
from pcor_sql.ledger.charge_rules import NEEDS_REPAIR
from pcor_sql.ledger.store_interface import HISTORY_FIXED_COLUMNS, HISTORY_ROW_COLUMNS

_PLACEHOLDER = re.compile(r"\$(\d+)")
#: The server's now, as the ledger's naive UTC timestamps: the transaction's start, so that one
#: transaction judges every lease at one moment (DESIGN.md §11 "Dead hosts": never a host's clock).
NOW = "(now() AT TIME ZONE 'UTC')"
#: A history row `h`'s holder holds a live lease (`postgres_chain`).
LEASED = (f"EXISTS (SELECT 1 FROM pcor.leases l WHERE l.host = h.host AND l.pid = h.pid"
          f" AND l.process_token = h.process_token AND l.expires_at >= {NOW})")


def run(cur: Any, query: str, params: Sequence[object] = ()) -> Any:
    """Execute `query` (placeholders $1, $2, ...; no literal %) with `params` on a psycopg cursor."""
    text = _PLACEHOLDER.sub(lambda m: f"%(p{m.group(1)})s", query)
    cur.execute(text, {f"p{i + 1}": v for i, v in enumerate(params)} if params else None)
    return cur


def _all(cur: Any, query: str, params: Sequence[object] = ()) -> list[tuple]:
    return [tuple(r) for r in run(cur, query, params).fetchall()]


_BUDGET_PARTS = [
    "SELECT 'b'::text AS tag, unit AS name, limit_epsilon AS x, spent_epsilon AS y, spent_residual AS z,"
    " releases AS n, NULL::text[] AS names FROM pcor.budget WHERE notion = $2 AND unit = ANY($1::text[])",
    "SELECT 'p', unit, NULL, NULL, NULL, NULL, NULL FROM pcor.units WHERE public AND unit = ANY($1::text[])",
    f"SELECT 's', name, value, NULL, NULL, NULL, NULL FROM pcor.settings"
    f" WHERE starts_with(name, 'default_limit_') OR name = '{NEEDS_REPAIR}'",
]


def _quota_parts(analyst: str, datasets: str) -> tuple[str, str]:
    return (f"SELECT 'a', name, NULL, NULL, NULL, CASE WHEN revoked_at IS NULL THEN 0 ELSE 1 END, datasets"
            f" FROM pcor.analysts WHERE name = {analyst}",
            f"SELECT 'q', dataset, limit_epsilon, spent_epsilon, spent_residual, releases, NULL FROM pcor.quotas"
            f" WHERE analyst = {analyst} AND notion = $2 AND dataset = ANY({datasets}::text[])")


def _tagged(cur: Any, parts: Sequence[str], params: Sequence[object]) -> dict[str, list[tuple]]:
    return by_tag(run(cur, " UNION ALL ".join(parts), params).fetchall())


# The sums are taken in numeric: exact, so the check's slack only covers the totals' own rounding.
_UNIT_SUMS = ("SELECT unit, notion, coalesce(sum(epsilon::numeric) FILTER (WHERE NOT refunded), 0) AS kept,"
              " sum(epsilon::numeric) AS gross, count(*) AS rows FROM pcor.history GROUP BY unit, notion")
_RELEASES = ("SELECT analyst, notion, coalesce(dataset, '') AS dataset, release_id, max(epsilon) AS eps,"
             " bool_or(refunded) AS refunded FROM pcor.history WHERE analyst IS NOT NULL"
             " GROUP BY analyst, notion, coalesce(dataset, ''), release_id")
_ANALYST_SUMS = (f"SELECT analyst, notion, d AS dataset, coalesce(sum(eps::numeric) FILTER (WHERE NOT refunded), 0) AS kept,"
                 f" sum(eps::numeric) AS gross, count(*) AS rows FROM ({_RELEASES}) r CROSS JOIN LATERAL"
                 f" unnest(CASE WHEN r.dataset = '' THEN ARRAY['']::text[] ELSE ARRAY['', r.dataset]::text[] END) AS u(d)"
                 f" GROUP BY analyst, notion, d")


def _mismatch_sql(slack: float) -> str:
    return (
        "SELECT label, notion, spent::float8, kept::float8 FROM ("
        " SELECT coalesce(b.unit, h.unit) AS label, coalesce(b.notion, h.notion) AS notion,"
        " coalesce(b.spent_epsilon::numeric + b.spent_residual::numeric, 0) AS spent,"
        " coalesce(h.kept, 0) AS kept, coalesce(h.gross, 0) AS gross"
        f" FROM pcor.budget b FULL JOIN ({_UNIT_SUMS}) h ON h.unit = b.unit AND h.notion = b.notion"
        " UNION ALL"
        " SELECT 'analyst:' || coalesce(q.analyst, h.analyst) || CASE WHEN coalesce(q.dataset, h.dataset) = '' THEN ''"
        " ELSE '/' || coalesce(q.dataset, h.dataset) END, coalesce(q.notion, h.notion),"
        " coalesce(q.spent_epsilon::numeric + q.spent_residual::numeric, 0), coalesce(h.kept, 0), coalesce(h.gross, 0)"
        f" FROM pcor.quotas q FULL JOIN ({_ANALYST_SUMS}) h"
        " ON h.analyst = q.analyst AND h.notion = q.notion AND h.dataset = q.dataset"
        f") t WHERE abs(spent - kept) > {float(slack)!r} * greatest(gross, spent) ORDER BY label COLLATE \"C\", notion"
    )


class PostgresChargeOps:
    """The charge, outcome and consistency parts of `PostgresOps` (a psycopg cursor `cur`)."""

    cur: Any

    def charge_rows(self, units, notion, ids, analyst, datasets):
        parts = [*_BUDGET_PARTS,
                 "(SELECT 'l', NULL, NULL, NULL, NULL, NULL, NULL FROM pcor.budget WHERE limit_epsilon IS NOT NULL LIMIT 1)",
                 "SELECT 'h', release_id, epsilon, NULL, NULL, NULL, ARRAY[unit] FROM pcor.history"
                 " WHERE release_id = ANY($3::text[])"]
        params: list[object] = [list(units), notion, list(ids)]
        if analyst is not None:
            parts += _quota_parts("$4", "$5")
            params += [analyst, list(datasets)]
        return _tagged(self.cur, parts, params)

    def fit_rows(self, units, notion, analyst, datasets):
        return _tagged(self.cur, [*_BUDGET_PARTS, _quota_parts("$3::text", "$4")[1]],
                       [list(units), notion, analyst, list(datasets)])

    def append_history(self, fixed, columns):
        names = list(HISTORY_ROW_COLUMNS)
        types = {"seq": "bigint", "epsilon": "float8", "k": "bigint", "spent_after": "float8", "seeded": "boolean"}
        arrays = ", ".join(f"${i + 8}::{types.get(n, 'text')}[]" for i, n in enumerate(names))
        run(self.cur,
            f"INSERT INTO pcor.history ({', '.join(HISTORY_FIXED_COLUMNS)}, {', '.join(names)})"
            f" SELECT $1::text, $2::timestamp, $3::text, $4::text, $5::bigint, $6::text, $7::text, v.*"
            f" FROM unnest({arrays}) AS v", [*fixed, *(columns[n] for n in names)])

    def update_budgets(self, notion, units, spent, residual, releases, now, stored):
        params = [units, notion, spent, residual, releases, now]
        rows = "unnest($1::text[], $3::float8[], $4::float8[], $5::bigint[]) AS v(u, s, r, n)"
        if stored:
            return run(self.cur, f"UPDATE pcor.budget AS b SET spent_epsilon = v.s, spent_residual = v.r, releases = v.n,"
                                 f" updated_at = $6 FROM {rows} WHERE b.notion = $2 AND b.unit = v.u", params).rowcount
        run(self.cur,
            f"INSERT INTO pcor.budget (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases,"
            f" created_at, updated_at) SELECT v.u, $2, NULL, v.s, v.r, v.n, $6, $6 FROM {rows}"
            " ON CONFLICT (unit, notion) DO UPDATE SET spent_epsilon = excluded.spent_epsilon,"
            " spent_residual = excluded.spent_residual, releases = excluded.releases, updated_at = excluded.updated_at",
            params)
        return None

    def update_quotas(self, analyst, notion, datasets, spent, residual, releases, now, stored):
        params = [analyst, notion, datasets, spent, residual, releases, now]
        rows = "unnest($3::text[], $4::float8[], $5::float8[], $6::bigint[]) AS v(d, s, r, n)"
        if stored:
            return run(self.cur, f"UPDATE pcor.quotas AS q SET spent_epsilon = v.s, spent_residual = v.r, releases = v.n,"
                                 f" updated_at = $7 FROM {rows} WHERE q.analyst = $1 AND q.notion = $2 AND q.dataset = v.d",
                       params).rowcount
        run(self.cur,
            f"INSERT INTO pcor.quotas (analyst, notion, dataset, limit_epsilon, spent_epsilon, spent_residual,"
            f" releases, updated_at) SELECT $1, $2, v.d, NULL, v.s, v.r, v.n, $7 FROM {rows}"
            " ON CONFLICT (analyst, notion, dataset) DO UPDATE SET spent_epsilon = excluded.spent_epsilon,"
            " spent_residual = excluded.spent_residual, releases = excluded.releases, updated_at = excluded.updated_at",
            params)
        return None

    def set_outcome(self, ids, outcome, reason, refunded, now):
        return _all(self.cur,
                    "UPDATE pcor.history SET outcome = $1, reason = $2, refunded = $3, finished_at = $4"
                    " WHERE release_id = ANY($5::text[]) AND outcome = 'running' RETURNING unit, notion, epsilon, analyst",
                    [outcome, reason, bool(refunded), now, list(ids)])

    def budget_spent(self, notion, units):
        return _all(self.cur, "SELECT unit, spent_epsilon, spent_residual FROM pcor.budget"
                              " WHERE notion = $1 AND unit = ANY($2::text[])", [notion, list(units)])

    def set_budget_spent(self, notion, units, spent, residual, now):
        run(self.cur,
            "UPDATE pcor.budget AS b SET spent_epsilon = v.s, spent_residual = v.r, updated_at = $5"
            " FROM unnest($1::text[], $2::float8[], $3::float8[]) AS v(u, s, r) WHERE b.unit = v.u AND b.notion = $4",
            [units, spent, residual, notion, now])

    def history_of(self, ids):
        return _all(self.cur, "SELECT release_id, unit, notion, epsilon, refunded, spent_after FROM pcor.history"
                              " WHERE release_id = ANY($1::text[]) ORDER BY unit COLLATE \"C\", notion, seq", [list(ids)])

    def set_spent_after(self, ids, units, notions, values):
        run(self.cur,
            "UPDATE pcor.history AS h SET spent_after = v.s FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[])"
            " AS v(r, u, n, s) WHERE h.release_id = v.r AND h.unit = v.u AND h.notion = v.n", [ids, units, notions, values])

    def mark_interrupted(self, host, keys, now):
        changed = _all(self.cur,
                       "UPDATE pcor.history SET outcome = 'interrupted', reason = 'process ended', finished_at = $1"
                       " WHERE outcome = 'running' AND host = $2"
                       " AND (pid::text || ':' || coalesce(process_token, '')) = ANY($3::text[]) RETURNING release_id",
                       [now, host, keys])
        return sorted({rid for (rid,) in changed})

    def mismatches(self, slack):
        return _all(self.cur, _mismatch_sql(slack))

    def open_state(self, slack):
        found = self.mismatches(slack)
        running = _all(self.cur, f"SELECT DISTINCT h.host, h.pid, h.process_token, {LEASED} FROM pcor.history h"
                                 " WHERE h.outcome = 'running'")  # through the partial index history_running
        flagged = _all(self.cur, f"SELECT value FROM pcor.settings WHERE name = '{NEEDS_REPAIR}'")
        return found, running, flagged[0][0] if flagged else None

    def reset_totals(self, now):
        cur = self.cur
        run(cur, f"INSERT INTO pcor.budget (unit, notion, limit_epsilon, spent_epsilon, spent_residual, releases, created_at,"
                 f" updated_at) SELECT unit, notion, NULL, kept::float8, 0, rows, $1, $1 FROM ({_UNIT_SUMS}) s"
                 " ON CONFLICT (unit, notion) DO UPDATE SET spent_epsilon = excluded.spent_epsilon, spent_residual = 0,"
                 " releases = excluded.releases, updated_at = excluded.updated_at", [now])
        run(cur, "UPDATE pcor.budget AS b SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
                 " WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM pcor.history h"
                 " WHERE h.unit = b.unit AND h.notion = b.notion)", [now])
        run(cur, f"INSERT INTO pcor.quotas (analyst, notion, dataset, limit_epsilon, spent_epsilon, spent_residual, releases,"
                 f" updated_at) SELECT analyst, notion, dataset, NULL, kept::float8, 0, rows, $1 FROM ({_ANALYST_SUMS}) s"
                 " ON CONFLICT (analyst, notion, dataset) DO UPDATE SET spent_epsilon = excluded.spent_epsilon,"
                 " spent_residual = 0, releases = excluded.releases, updated_at = excluded.updated_at", [now])
        run(cur, "UPDATE pcor.quotas AS q SET spent_epsilon = 0, spent_residual = 0, releases = 0, updated_at = $1"
                 " WHERE (spent_epsilon <> 0 OR releases <> 0) AND NOT EXISTS (SELECT 1 FROM pcor.history h"
                 " WHERE h.analyst = q.analyst AND h.notion = q.notion AND (q.dataset = '' OR h.dataset = q.dataset))", [now])

    def set_setting(self, name, value, now):
        run(self.cur, "INSERT INTO pcor.settings (name, value, updated_at) VALUES ($1, $2, $3)"
                      " ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [name, value, now])

    def delete_setting(self, name):
        run(self.cur, "DELETE FROM pcor.settings WHERE name = $1", [name])
