"""The PostgreSQL store's SQL of budgets, analysts, the registry and the owner's views
(`store_interface.LedgerOps`; `postgres_ops` has the charge's). Text is ordered by code point
(COLLATE "C"), as the embedded store orders it, whatever the server's locale."""

from __future__ import annotations

from typing import Any

from pcor_sql.ledger import registry_statements as statements
from pcor_sql.ledger.charge_rules import TABLE_NAMES
from pcor_sql.ledger.postgres_ops import _all, run

_ORDER = ' ORDER BY released_at DESC, unit COLLATE "C" DESC, notion DESC, seq DESC'
_DATASET_COLUMNS = ("name, relation, key_column, metrics, attributes, domains, units, accounting, created_at,"
                    " cardinality(releasable)")


class PostgresRegistryOps:
    """The budget, analyst, registry and owner-view parts of `PostgresOps` (a psycopg cursor `cur`)."""

    cur: Any

    # ---- budgets ------------------------------------------------------------------------------

    def statuses(self, unit, notion, notions):
        units = ("SELECT $1::text AS unit" if unit is not None
                 else "SELECT unit FROM pcor.budget UNION SELECT unit FROM pcor.units")
        params: list[object] = [unit if unit is not None else "", list(notions)]
        where = ""
        if notion is not None:
            params.append(notion)
            where = "WHERE n.notion = $3"
        return _all(self.cur,
                    f"SELECT u.unit, n.notion, b.limit_epsilon, (SELECT value FROM pcor.settings s"
                    f" WHERE s.name = 'default_limit_' || n.notion), coalesce(b.spent_epsilon, 0),"
                    f" (SELECT count(*) FROM pcor.history h WHERE h.unit = u.unit AND h.notion = n.notion"
                    f" AND NOT coalesce(h.refunded, false)), coalesce(p.public, false)"
                    f" FROM ({units}) u CROSS JOIN unnest($2::text[]) AS n(notion)"
                    f" LEFT JOIN pcor.budget b ON b.unit = u.unit AND b.notion = n.notion"
                    f" LEFT JOIN pcor.units p ON p.unit = u.unit {where}"
                    f" ORDER BY u.unit COLLATE \"C\", n.notion COLLATE \"C\"", params)

    def strict(self):
        rows = _all(self.cur, "SELECT EXISTS (SELECT 1 FROM pcor.budget WHERE limit_epsilon IS NOT NULL)"
                              " OR EXISTS (SELECT 1 FROM pcor.settings WHERE starts_with(name, 'default_limit_')"
                              " AND value IS NOT NULL)")
        return bool(rows and rows[0][0])

    def history(self, unit, limit):
        return _all(self.cur, *statements.history("pcor.history", _ORDER, unit, limit))

    def budget_row(self, unit, notion):
        rows = _all(self.cur, statements.budget_row("pcor.budget"), [unit, notion])
        return rows[0] if rows else None

    def upsert_limit(self, unit, notion, limit, now):
        run(self.cur, statements.upsert_limit("pcor.budget"), [unit, notion, limit, now])

    def set_public(self, unit, public, now):
        run(self.cur, statements.set_public("pcor.units"), [unit, bool(public), now])

    # ---- analysts -----------------------------------------------------------------------------

    def analyst_row(self, name):
        rows = _all(self.cur, "SELECT created_at, revoked_at, datasets FROM pcor.analysts WHERE name = $1", [name])
        return rows[0] if rows else None

    def insert_analyst(self, name, token_hash, datasets, now):
        run(self.cur, "INSERT INTO pcor.analysts (name, token_hash, datasets, created_at) VALUES ($1, $2, $3::text[], $4)",
            [name, token_hash, datasets, now])

    def revoke_analyst(self, name, now):
        run(self.cur, "UPDATE pcor.analysts SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL", [name, now])

    def set_token(self, name, token_hash):
        run(self.cur, "UPDATE pcor.analysts SET token_hash = $2, revoked_at = NULL WHERE name = $1", [name, token_hash])

    def analyst_names(self):
        return [name for (name,) in _all(self.cur, 'SELECT name FROM pcor.analysts ORDER BY name COLLATE "C"')]

    def analyst_tokens(self):
        return _all(self.cur, "SELECT name, token_hash, revoked_at IS NOT NULL, datasets FROM pcor.analysts")

    def quota_rows_of(self, name):
        return _all(self.cur, "SELECT notion, dataset, limit_epsilon, spent_epsilon, releases FROM pcor.quotas"
                              " WHERE analyst = $1", [name])

    def set_quota_limits(self, name, notions, dataset, limit, keep_limit, now):
        keep = "q.limit_epsilon" if keep_limit else "excluded.limit_epsilon"
        run(self.cur, "INSERT INTO pcor.quotas AS q (analyst, notion, dataset, limit_epsilon, updated_at)"
                      " SELECT $1, n, $3, $4, $5 FROM unnest($2::text[]) AS n ON CONFLICT (analyst, notion, dataset)"
                      f" DO UPDATE SET limit_epsilon = {keep}, updated_at = excluded.updated_at",
            [name, list(notions), dataset, limit, now])

    def analyst_requests(self, name, limit, before):
        params: list[Any] = [name]
        older = ""
        if before is not None:
            params.append(before)
            # (time, id) strictly before the named request's: a page boundary that never repeats or skips a row.
            older = (" HAVING (min(released_at), release_id) < (SELECT min(released_at), $2::text"
                     " FROM pcor.history WHERE analyst = $1 AND release_id = $2)"
                     " AND EXISTS (SELECT 1 FROM pcor.history WHERE analyst = $1 AND release_id = $2)")
        if limit is not None:
            params.append(limit)
        # Every row of one release holds the same notion, ε, k, mechanism, dataset, key and outcome.
        return _all(self.cur,
                    "SELECT release_id, min(released_at) AS asked_at, min(notion), min(epsilon), min(k), min(mechanism),"
                    " min(dataset), min(record_key), min(outcome) FROM pcor.history WHERE analyst = $1"
                    f" GROUP BY release_id{older} ORDER BY asked_at DESC, release_id COLLATE \"C\" DESC"
                    + (f" LIMIT ${len(params)}" if limit is not None else ""), params)

    def request_counts(self):
        return _all(self.cur, "SELECT analyst, outcome, count(DISTINCT release_id) FROM pcor.history"
                              " WHERE analyst IS NOT NULL GROUP BY analyst, outcome")

    # ---- the registry -------------------------------------------------------------------------

    def dataset_exists(self, name):
        return bool(_all(self.cur, "SELECT count(*) FROM pcor.datasets WHERE name = $1", [name])[0][0])

    def put_dataset(self, row):
        run(self.cur, "DELETE FROM pcor.datasets WHERE name = $1", [row[0]])
        run(self.cur, "INSERT INTO pcor.datasets (name, relation, key_column, metrics, attributes, domains, units,"
                      " accounting, created_at, releasable) VALUES ($1, $2, $3, $4::text[], $5::text[], $6,"
                      " $7::text[], $8, $9, $10::text[])", list(row))

    def delete_dataset(self, name):
        run(self.cur, "DELETE FROM pcor.datasets WHERE name = $1", [name])

    def dataset_rows(self, name):
        if name is None:
            return _all(self.cur, f'SELECT {_DATASET_COLUMNS} FROM pcor.datasets ORDER BY name COLLATE "C"')
        return _all(self.cur, f"SELECT {_DATASET_COLUMNS} FROM pcor.datasets WHERE name = $1", [name])

    def releasable(self, name):
        rows = _all(self.cur, "SELECT releasable FROM pcor.datasets WHERE name = $1", [name])
        return rows[0][0] if rows else None

    def releasable_page(self, name, offset, limit):
        rows = _all(self.cur, "SELECT cardinality(releasable), releasable[$2:$3] FROM pcor.datasets WHERE name = $1",
                    [name, offset + 1, offset + limit])
        return tuple(rows[0]) if rows else None

    def releasable_has_all(self, name, texts):
        rows = _all(self.cur, "SELECT coalesce(releasable @> $2::text[], false) FROM pcor.datasets WHERE name = $1",
                    [name, list(texts)])
        return bool(rows and rows[0][0])

    # ---- the owner's views --------------------------------------------------------------------

    def history_page(self, filters, limit, offset):
        count, page, params = statements.history_page("pcor.history", "count(*)", _ORDER, filters, limit, offset)
        total = _all(self.cur, count, params)[0][0]
        rows = _all(self.cur, page, params)
        return int(total), rows

    def spending(self, by, points):
        if by == "unit":
            rows = ("SELECT unit || ' (' || notion || ')' AS who, released_at AS moment, seq, epsilon FROM pcor.history"
                    " WHERE NOT refunded")
        else:  # one charge per release, whatever the number of units it read
            rows = ("SELECT analyst || ' (' || min(notion) || ')' AS who, min(released_at) AS moment, 0 AS seq,"
                    " min(epsilon) AS epsilon FROM pcor.history WHERE analyst IS NOT NULL AND NOT refunded"
                    " GROUP BY analyst, release_id")
        return _all(self.cur,
                    f"WITH r AS ({rows}), c AS (SELECT who, moment, sum(epsilon) OVER (PARTITION BY who ORDER BY moment, seq"
                    " ROWS UNBOUNDED PRECEDING) AS total, row_number() OVER (PARTITION BY who ORDER BY moment, seq) AS n"
                    " FROM r), span AS (SELECT extract(epoch FROM min(moment)) AS lo, greatest(extract(epoch FROM"
                    " max(moment)) - extract(epoch FROM min(moment)), 1e-6) AS width FROM r), b AS (SELECT who, moment,"
                    " total, n, least(floor((extract(epoch FROM moment) - lo) / width * $1::int), $1::int - 1) AS slice"
                    " FROM c, span), last AS (SELECT DISTINCT ON (who, slice) who, moment, total FROM b"
                    " ORDER BY who, slice, n DESC) SELECT who, moment, total FROM last ORDER BY who COLLATE \"C\", moment",
                    [int(points)])

    # ---- whole tables -------------------------------------------------------------------------

    def dump(self):
        out = {}
        for name in TABLE_NAMES:
            result = run(self.cur, f"SELECT * FROM pcor.{name}")
            columns = tuple(d.name for d in result.description)
            out[name] = (columns, [tuple(r) for r in result.fetchall()])
        return out

    def load(self, tables):
        for name, (columns, rows) in tables.items():
            if rows:
                marks = ", ".join(f"%s" for _ in columns)
                self.cur.executemany(f"INSERT INTO pcor.{name} ({', '.join(columns)}) VALUES ({marks})",
                                     [list(r) for r in rows])

    def raw(self, query, params=()):
        result = run(self.cur, query, params)
        return [tuple(r) for r in result.fetchall()] if result.description else []
