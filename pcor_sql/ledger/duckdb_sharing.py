"""The DuckDB store's part of "several services, one ledger" (DESIGN.md §11;
`store_interface.LedgerOps`, the rules are in `ledger.sharing`).

Identity generation: a DuckDB ledger is written by one process at a time (the file's lock), so
the count of identity changes that process keeps (`analysts.identity_changes`) is the whole
story: there is no generation to read (None).

Fingerprints: table `pcor.fingerprints`, made when the first one is recorded and kept beside
the layout of sql/ledger.sql (like the marker table, `duckdb_store.MARKER_TABLE`), so that a
ledger of an earlier version opens without a migration; one without it holds no fingerprints.
"""

from __future__ import annotations

from typing import Any

from pcor_sql.ledger.charge_rules import Tables

FINGERPRINTS = "fingerprints"
_COLUMNS = "dataset, seq, relation, row_count, content_hash, method, note, recorded_at"
_CREATE = (
    "CREATE TABLE IF NOT EXISTS {table} (dataset VARCHAR NOT NULL, seq BIGINT NOT NULL, relation VARCHAR NOT NULL,"
    " row_count BIGINT NOT NULL, content_hash VARCHAR NOT NULL, method VARCHAR NOT NULL, note VARCHAR NOT NULL,"
    " recorded_at TIMESTAMP NOT NULL, PRIMARY KEY (dataset, seq))"
)


def _database(prefix: str) -> str:
    """The database name of a `Tables` prefix (`"name".pcor.`)."""
    quoted = prefix[: -len(".pcor.")]
    return quoted[1:-1].replace('""', '"') if quoted.startswith('"') else quoted


class DuckDBSharingOps:
    """The sharing part of `DuckDBOps` (cursor `cur`, tables `t`)."""

    cur: Any
    t: Tables

    def identity_generation(self):
        return None

    def bump_identity_generation(self):
        return None

    def _fingerprint_table(self) -> str | None:
        found = self.cur.execute(
            "SELECT system.main.count(*) FROM system.main.duckdb_tables() WHERE database_name = $1"
            " AND schema_name = 'pcor' AND table_name = $2", [_database(self.t.prefix), FINGERPRINTS]).fetchall()
        return self.t.prefix + FINGERPRINTS if found[0][0] else None

    def fingerprints(self, name):
        table = self._fingerprint_table()
        if table is None:
            return []
        if name is None:
            return self.cur.execute(f"SELECT {_COLUMNS} FROM {table} ORDER BY dataset, seq").fetchall()
        return self.cur.execute(f"SELECT {_COLUMNS} FROM {table} WHERE dataset = $1 ORDER BY seq", [name]).fetchall()

    def record_fingerprint(self, row):
        table = self.t.prefix + FINGERPRINTS
        self.cur.execute(_CREATE.format(table=table))
        self.cur.execute(f"INSERT INTO {table} ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", list(row))
