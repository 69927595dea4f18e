"""Fixtures of the ledger tests: an in-memory connection and its ledger (warning silenced)."""

from __future__ import annotations

import warnings

import duckdb
import pytest

from pcor_sql.errors import PrivacyWarning
from pcor_sql.ledger.store import Ledger


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


@pytest.fixture
def ledger(con):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return Ledger(con)
