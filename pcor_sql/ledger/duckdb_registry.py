"""The DuckDB store's SQL of budgets, analysts, the registry and the owner's views
(`store_interface`; the rules that call it are in `store`, `analysts`, `dataset_registry` and
`service.owner_plane`). Built-ins are called as `system.main.<name>` (see `duckdb_charges`)."""

from __future__ import annotations

import re
from typing import Any

from pcor_sql.ledger import registry_statements as statements
from pcor_sql.ledger.charge_rules import TABLE_NAMES, Tables

_ORDER = " ORDER BY released_at DESC, unit DESC, notion DESC, seq DESC"
_DATASET_COLUMNS = ("name, relation, key_column, metrics, attributes, domains, units, accounting, created_at,"
                    " system.main.len(releasable)")


class DuckDBRegistryOps:
    """The budget, analyst, registry and owner-view parts of `DuckDBOps` (cursor `cur`, tables `t`)."""

    cur: Any
    t: Tables

    def _all(self, query: str, params: list[object] | tuple = ()) -> list[tuple]:
        return self.cur.execute(query, list(params)).fetchall()

    # ---- budgets ------------------------------------------------------------------------------

    def statuses(self, unit, notion, notions):
        t = self.t
        units = "SELECT $1 AS unit" if unit is not None else f"SELECT unit FROM {t.budget} UNION SELECT unit FROM {t.units}"
        where, params = ("WHERE n.notion = $2", [unit, notion]) if unit is not None and notion is not None else \
            ("WHERE n.notion = $1", [notion]) if notion is not None else ("", [unit] if unit is not None else [])
        listed = ", ".join(repr(str(n)) for n in notions)
        return self._all(
            f"SELECT u.unit, n.notion, b.limit_epsilon, (SELECT value FROM {t.settings} s"
            f" WHERE s.name = system.main.concat('default_limit_', n.notion)), coalesce(b.spent_epsilon, 0),"
            # Releases are the charges that stand: a refunded row is no release (`b.releases` numbers every row).
            f" (SELECT system.main.count(*) FROM {t.history} h WHERE h.unit = u.unit AND h.notion = n.notion"
            f" AND NOT coalesce(h.refunded, false)),"
            f" coalesce(p.public, false) FROM ({units}) u CROSS JOIN (SELECT unnest(system.main.list_value({listed}))"
            f" AS notion) n LEFT JOIN {t.budget} b ON b.unit = u.unit AND b.notion = n.notion"
            f" LEFT JOIN {t.units} p ON p.unit = u.unit {where} ORDER BY u.unit, n.notion", params)

    def strict(self):
        t = self.t
        rows = self._all(
            f"SELECT EXISTS (SELECT 1 FROM {t.budget} WHERE limit_epsilon IS NOT NULL)"
            f" OR EXISTS (SELECT 1 FROM {t.settings} WHERE system.main.starts_with(name, 'default_limit_')"
            f" AND value IS NOT NULL)")
        return bool(rows and rows[0][0])

    def history(self, unit, limit):
        return self._all(*statements.history(self.t.history, _ORDER, unit, limit))

    def budget_row(self, unit, notion):
        rows = self._all(statements.budget_row(self.t.budget), [unit, notion])
        return rows[0] if rows else None

    def upsert_limit(self, unit, notion, limit, now):
        self.cur.execute(statements.upsert_limit(self.t.budget), [unit, notion, limit, now])

    def set_public(self, unit, public, now):
        self.cur.execute(statements.set_public(self.t.units), [unit, bool(public), now])

    # ---- analysts -----------------------------------------------------------------------------

    def analyst_row(self, name):
        rows = self._all(f"SELECT created_at, revoked_at, datasets FROM {self.t.analysts} WHERE name = $1", [name])
        return rows[0] if rows else None

    def insert_analyst(self, name, token_hash, datasets, now):
        self.cur.execute(f"INSERT INTO {self.t.analysts} (name, token_hash, datasets, created_at) VALUES ($1, $2, $3, $4)",
                         [name, token_hash, datasets, now])

    def revoke_analyst(self, name, now):
        self.cur.execute(f"UPDATE {self.t.analysts} SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL", [name, now])

    def set_token(self, name, token_hash):
        self.cur.execute(f"UPDATE {self.t.analysts} SET token_hash = $2, revoked_at = NULL WHERE name = $1",
                         [name, token_hash])

    def analyst_names(self):
        return [name for (name,) in self._all(f"SELECT name FROM {self.t.analysts} ORDER BY name")]

    def analyst_tokens(self):
        return self._all(f"SELECT name, token_hash, revoked_at IS NOT NULL, datasets FROM {self.t.analysts}")

    def quota_rows_of(self, name):
        return self._all(f"SELECT notion, dataset, limit_epsilon, spent_epsilon, releases FROM {self.t.quotas}"
                         " WHERE analyst = $1", [name])

    def set_quota_limits(self, name, notions, dataset, limit, keep_limit, now):
        keep = "limit_epsilon" if keep_limit else "excluded.limit_epsilon"
        self.cur.execute(
            f"INSERT INTO {self.t.quotas} (analyst, notion, dataset, limit_epsilon, updated_at)"
            " SELECT $1, unnest($2::VARCHAR[]), $3, $4, $5 ON CONFLICT (analyst, notion, dataset) DO UPDATE SET"
            f" limit_epsilon = {keep}, updated_at = excluded.updated_at", [name, list(notions), dataset, limit, now])

    def analyst_requests(self, name, limit, before):
        table = self.t.history
        params: list[Any] = [name]
        older = ""
        if before is not None:
            params.append(before)
            # (time, id) strictly before the named request's: a page boundary that never repeats or skips a row.
            older = (f" HAVING (system.main.min(released_at), release_id) < (SELECT (system.main.min(released_at), $2)"
                     f" FROM {table} WHERE analyst = $1 AND release_id = $2)"
                     f" AND EXISTS (SELECT 1 FROM {table} WHERE analyst = $1 AND release_id = $2)")
        if limit is not None:
            params.append(limit)
        return self._all(
            f"SELECT release_id, system.main.min(released_at) AS asked_at, system.main.any_value(notion),"
            f" system.main.any_value(epsilon), system.main.any_value(k), system.main.any_value(mechanism),"
            f" system.main.any_value(dataset), system.main.any_value(record_key), system.main.any_value(outcome)"
            f" FROM {table} WHERE analyst = $1 GROUP BY release_id{older} ORDER BY asked_at DESC, release_id DESC"
            + (f" LIMIT ${len(params)}" if limit is not None else ""), params)

    def request_counts(self):
        return self._all(f"SELECT analyst, outcome, system.main.count(DISTINCT release_id) FROM {self.t.history}"
                         " WHERE analyst IS NOT NULL GROUP BY ALL")

    # ---- the registry -------------------------------------------------------------------------

    def dataset_exists(self, name):
        return bool(self._all(f"SELECT system.main.count(*) FROM {self.t.datasets} WHERE name = $1", [name])[0][0])

    def put_dataset(self, row):
        self.cur.execute(f"DELETE FROM {self.t.datasets} WHERE name = $1", [row[0]])
        self.cur.execute(
            f"INSERT INTO {self.t.datasets} (name, relation, key_column, metrics, attributes, domains, units, accounting,"
            " created_at, releasable) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", list(row))

    def delete_dataset(self, name):
        self.cur.execute(f"DELETE FROM {self.t.datasets} WHERE name = $1", [name])

    def dataset_rows(self, name):
        if name is None:
            return self._all(f"SELECT {_DATASET_COLUMNS} FROM {self.t.datasets} ORDER BY name")
        return self._all(f"SELECT {_DATASET_COLUMNS} FROM {self.t.datasets} WHERE name = $1", [name])

    def releasable(self, name):
        rows = self._all(f"SELECT releasable FROM {self.t.datasets} WHERE name = $1", [name])
        return rows[0][0] if rows else None

    def releasable_page(self, name, offset, limit):
        rows = self._all(f"SELECT system.main.len(releasable), system.main.list_slice(releasable, $2, $3)"
                         f" FROM {self.t.datasets} WHERE name = $1", [name, offset + 1, offset + limit])
        return tuple(rows[0]) if rows else None

    def releasable_has_all(self, name, texts):
        rows = self._all(f"SELECT coalesce(system.main.list_has_all(releasable, $2::VARCHAR[]), false)"
                         f" FROM {self.t.datasets} WHERE name = $1", [name, list(texts)])
        return bool(rows and rows[0][0])

    # ---- the owner's views --------------------------------------------------------------------

    def history_page(self, filters, limit, offset):
        count, page, params = statements.history_page(self.t.history, "system.main.count(*)", _ORDER, filters,
                                                      limit, offset)
        total = self._all(count, params)[0][0]
        rows = self._all(page, params)
        return int(total), rows

    def spending(self, by, points):
        table = self.t.history
        if by == "unit":
            rows = (f"SELECT unit || ' (' || notion || ')' AS who, released_at AS moment, seq, epsilon FROM {table}"
                    " WHERE NOT refunded")
        else:  # one charge per release, whatever the number of units it read
            rows = (f"SELECT analyst || ' (' || system.main.any_value(notion) || ')' AS who,"
                    f" system.main.min(released_at) AS moment, 0 AS seq, system.main.any_value(epsilon) AS epsilon"
                    f" FROM {table} WHERE analyst IS NOT NULL AND NOT refunded GROUP BY analyst, release_id")
        return self._all(
            f"WITH r AS ({rows}), c AS (SELECT who, moment, system.main.sum(epsilon) OVER (PARTITION BY who ORDER BY moment, seq"
            " ROWS UNBOUNDED PRECEDING) AS total, system.main.row_number() OVER (PARTITION BY who ORDER BY moment, seq)"
            " AS n FROM r), span AS (SELECT system.main.epoch(system.main.min(moment)) AS lo,"
            " system.main.greatest(system.main.epoch(system.main.max(moment)) - system.main.epoch(system.main.min(moment)),"
            " 1e-6) AS width FROM r), b AS (SELECT who, moment, total, n, system.main.least(system.main.floor("
            "(system.main.epoch(moment) - lo) / width * $1), $1 - 1) AS slice FROM c, span)"
            " SELECT who, system.main.arg_max(moment, n), system.main.max_by(total, n) FROM b GROUP BY who, slice"
            " ORDER BY who, 2", [int(points)])

    # ---- whole tables -------------------------------------------------------------------------

    def dump(self):
        out = {}
        for name in TABLE_NAMES:
            result = self.cur.execute(f"SELECT * FROM {getattr(self.t, name)}")
            columns = tuple(d[0] for d in result.description)
            out[name] = (columns, result.fetchall())
        return out

    def load(self, tables):
        for name, (columns, rows) in tables.items():
            if rows:
                marks = ", ".join(f"${i + 1}" for i in range(len(columns)))
                self.cur.executemany(f"INSERT INTO {getattr(self.t, name)} ({', '.join(columns)}) VALUES ({marks})",
                                     [list(r) for r in rows])

    def raw(self, query, params=()):
        # `pcor.<table>` in a test's statement is this ledger's table, in whichever database it lives.
        query = re.sub(r"\bpcor\.(" + "|".join(TABLE_NAMES) + r")\b", lambda m: getattr(self.t, m.group(1)), query)
        result = self.cur.execute(query, list(params))
        return result.fetchall() if result.description else []
