"""Fixtures of the ledger tests: an in-memory connection, and its ledger on each store
(`ledger_on`, tests/conftest.py: every test that takes `ledger` runs on the embedded DuckDB
store and on PostgreSQL; warning silenced)."""

from __future__ import annotations

import duckdb
import pytest


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


@pytest.fixture
def ledger(con, ledger_on):
    return ledger_on(con)


@pytest.fixture
def reopen(con, ledger_on):
    """A second Ledger on the same store as `ledger` (a reopening, or another process's view)."""
    return lambda **options: ledger_on(con, **options)


@pytest.fixture
def duckdb_ledger(con):
    """The embedded store's ledger alone: for what only DuckDB has (its query log, its locks)."""
    import warnings

    from pcor_sql.errors import PrivacyWarning
    from pcor_sql.ledger.store import Ledger

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return Ledger(con)
