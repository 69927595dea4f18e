"""Ledgers as older pcor-sql versions wrote them (from `git log -p -- sql/ledger.sql`), to test
that they are refused and then migrated with their spent ε, limits and history."""

from __future__ import annotations

import datetime as dt

# Before schema `pcor` (sql/ledger.sql at 99ef44b): budgets per name, in the current schema.
BEFORE_PCOR = """
CREATE TABLE pcor_budget (
    dataset VARCHAR PRIMARY KEY, limit_epsilon DOUBLE, spent_epsilon DOUBLE NOT NULL DEFAULT 0,
    spent_residual DOUBLE NOT NULL DEFAULT 0, releases BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL);
CREATE TABLE pcor_release_history (
    release_id VARCHAR PRIMARY KEY, dataset VARCHAR NOT NULL, seq BIGINT NOT NULL, released_at TIMESTAMP NOT NULL,
    mechanism VARCHAR NOT NULL, epsilon DOUBLE NOT NULL, record_key VARCHAR, statement VARCHAR,
    spent_after DOUBLE NOT NULL);
"""

# Schema `pcor` before outcomes and analysts (sql/ledger.sql at a7d0b4e).
PCOR_WITHOUT_OUTCOMES = """
CREATE SCHEMA pcor;
CREATE TABLE pcor.budget (
    unit VARCHAR NOT NULL, notion VARCHAR NOT NULL, limit_epsilon DOUBLE, spent_epsilon DOUBLE NOT NULL DEFAULT 0,
    spent_residual DOUBLE NOT NULL DEFAULT 0, releases BIGINT NOT NULL DEFAULT 0, created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL, PRIMARY KEY (unit, notion));
CREATE TABLE pcor.units (unit VARCHAR PRIMARY KEY, public BOOLEAN NOT NULL, updated_at TIMESTAMP NOT NULL);
CREATE TABLE pcor.settings (name VARCHAR PRIMARY KEY, value DOUBLE, updated_at TIMESTAMP NOT NULL);
CREATE TABLE pcor.history (
    release_id VARCHAR NOT NULL, unit VARCHAR NOT NULL, notion VARCHAR NOT NULL, seq BIGINT NOT NULL,
    released_at TIMESTAMP NOT NULL, mechanism VARCHAR NOT NULL, epsilon DOUBLE NOT NULL, k BIGINT,
    record_key VARCHAR, statement VARCHAR, spent_after DOUBLE NOT NULL, seeded BOOLEAN NOT NULL,
    role VARCHAR NOT NULL, dataset VARCHAR, PRIMARY KEY (release_id, unit));
CREATE TABLE pcor.datasets (
    name VARCHAR PRIMARY KEY, relation VARCHAR NOT NULL, key_column VARCHAR NOT NULL, metrics VARCHAR[] NOT NULL,
    attributes VARCHAR[] NOT NULL, domains VARCHAR NOT NULL, units VARCHAR[] NOT NULL, accounting VARCHAR,
    created_at TIMESTAMP NOT NULL);
"""

T0 = dt.datetime(2025, 1, 1, 12, 0, 0)


def write_before_pcor(con, spent: dict[str, tuple[float, float | None, list[float]]]) -> None:
    """An old ledger: name → (spent, limit, ε of its history rows)."""
    con.execute(BEFORE_PCOR)
    for name, (total, limit, charges) in spent.items():
        con.execute("INSERT INTO pcor_budget VALUES (?, ?, ?, 0, ?, ?, ?)", [name, limit, total, len(charges), T0, T0])
        running = 0.0
        for j, eps in enumerate(charges):
            running += eps
            con.execute("INSERT INTO pcor_release_history VALUES (?, ?, ?, ?, 'bfs', ?, 'id = 42', 'SELECT ...', ?)",
                        [f"{name}-{j}", name, j + 1, T0 + dt.timedelta(minutes=j), eps, running])


def write_pcor_without_outcomes(con, unit: str, limit: float, charges: list[float]) -> None:
    con.execute(PCOR_WITHOUT_OUTCOMES)
    total = 0.0
    for j, eps in enumerate(charges):
        total += eps
        con.execute("INSERT INTO pcor.history VALUES (?, ?, 'ocdp', ?, ?, 'pcor/bfs/tight', ?, NULL, 'id = 42', NULL,"
                    " ?, false, 'owner', NULL)", [f"r{j}", unit, j + 1, T0 + dt.timedelta(minutes=j), eps, total])
    con.execute("INSERT INTO pcor.budget VALUES (?, 'ocdp', ?, ?, 0, ?, ?, ?)", [unit, limit, total, len(charges), T0, T0])

# The version before the history's hash chain and the leases (sql/ledger.sql at 889cbc4): every
# table of today's but pcor.history_chain, pcor.chain_heads and pcor.leases. Run on a ledger made
# today, it leaves the layout and the rows that version wrote (its writers wrote no chain). The
# statements hold for both stores.
BEFORE_CHAIN = """
DROP INDEX IF EXISTS pcor.history_chain_release_id;
DROP TABLE pcor.history_chain;
DROP TABLE pcor.chain_heads;
DROP TABLE pcor.leases;
"""
