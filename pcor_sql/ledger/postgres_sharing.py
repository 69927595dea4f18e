"""The PostgreSQL store's part of "several services, one ledger" (DESIGN.md §11;
`store_interface.LedgerOps`, the rules are in `ledger.sharing`).

Identity generation: a counter in `pcor.meta` (name 'identity_generation') that every add,
revoke and rotate of an analyst raises in its own SERIALIZABLE transaction — so a service that
reads it sees a change as soon as that transaction commits, and two owners' changes never lose
a count (each reads and writes the row: one of two concurrent ones is retried).

Fingerprints: table `pcor.fingerprints`, made when first written (CREATE TABLE IF NOT EXISTS,
kept beside the layout of sql/ledger_postgres.sql so that a ledger made by an earlier version
needs nothing done to it); a ledger without it holds no fingerprints.
"""

from __future__ import annotations

from typing import Any

from pcor_sql.ledger.postgres_ops import _all, run

GENERATION = "identity_generation"
_COLUMNS = "dataset, seq, relation, row_count, content_hash, method, note, recorded_at"
_CREATE = (
    "CREATE TABLE IF NOT EXISTS pcor.fingerprints (dataset text NOT NULL, seq bigint NOT NULL, relation text NOT NULL,"
    " row_count bigint NOT NULL, content_hash text NOT NULL, method text NOT NULL, note text NOT NULL,"
    " recorded_at timestamp NOT NULL, PRIMARY KEY (dataset, seq))"
)


class PostgresSharingOps:
    """The sharing part of `PostgresOps` (a psycopg cursor `cur`)."""

    cur: Any

    def identity_generation(self):
        rows = _all(self.cur, f"SELECT value FROM pcor.meta WHERE name = '{GENERATION}'")
        return int(rows[0][0]) if rows else 0

    def bump_identity_generation(self):
        run(self.cur, f"INSERT INTO pcor.meta (name, value) VALUES ('{GENERATION}', '1') ON CONFLICT (name)"
                      " DO UPDATE SET value = (pcor.meta.value::bigint + 1)::text")

    def fingerprints(self, name):
        if not _all(self.cur, "SELECT to_regclass('pcor.fingerprints') IS NOT NULL")[0][0]:
            return []
        if name is None:
            return _all(self.cur, f'SELECT {_COLUMNS} FROM pcor.fingerprints ORDER BY dataset COLLATE "C", seq')
        return _all(self.cur, f"SELECT {_COLUMNS} FROM pcor.fingerprints WHERE dataset = $1 ORDER BY seq", [name])

    def record_fingerprint(self, row):
        run(self.cur, _CREATE)
        run(self.cur, f"INSERT INTO pcor.fingerprints ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", list(row))
