"""Fixtures of the CLI tests: a salaries database file per test."""

from __future__ import annotations

import shutil

import pytest

from pcor_sql.engine.datasets import export_dataset


@pytest.fixture(scope="session")
def salaries_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("pristine") / "salaries.duckdb"
    export_dataset(None, "salaries", path, "duckdb")
    return path


@pytest.fixture
def db(salaries_file, tmp_path):
    """A fresh copy of a DuckDB file holding the bundled salaries table."""
    target = tmp_path / "work.duckdb"
    shutil.copy(salaries_file, target)
    return target


@pytest.fixture(autouse=True)
def ledger_file(tmp_path, monkeypatch):
    """Each CLI test gets its own per-user ledger file, as a fresh machine would."""
    path = tmp_path / "user-ledger.duckdb"
    monkeypatch.setenv("PCOR_SQL_LEDGER", str(path))
    return path
