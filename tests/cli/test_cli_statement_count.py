"""How many SQL statements one CLI release runs on its database, its ledger bookkeeping one
transaction: 1 ledger location, 2 parse, 5 privacy-unit resolution (catalog only: parse and
names, EXPLAIN, the plan's settings and the JSON plan), 1 DESCRIBE, 1 records, 1 summary (and,
for a verifier that reads the values, such as LOF, 1 read of DuckDB's `threads` setting, which
the summary build follows: DESIGN.md §10 "Building the summary"), and with a --db file the ledger's 16 in the same file: its
open check (totals against the history, rows still running and their leases), the process's
lease taken before the reservation and removed at the end (DESIGN.md §11 "Dead hosts"), its
reservation (BEGIN, one SELECT, two writes, the history chain's read and two writes — DESIGN.md
§11 —, COMMIT) and the outcome (BEGIN, one UPDATE, the chain's read and two writes, COMMIT)."""

from __future__ import annotations

from contextlib import contextmanager

import duckdb
import pytest

from cli_helpers import invoke

from pcor_sql.backends import opening as database_module
from pcor_sql.backends.opening import open_database
from pcor_sql.engine.datasets import load_dataset
from pcor_sql.ledger.store import Ledger

QUERY = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture()
def statements(monkeypatch):
    """The statements the command runs on its database after opening it (the query log)."""
    seen: list[str] = []

    @contextmanager
    def logged(path, reads=None):
        with open_database(path, reads) as con:
            con.execute("CALL enable_logging('QueryLog')")
            yield con
            rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog' ORDER BY timestamp").fetchall()
            seen.extend(m for (m,) in rows if "duckdb_logs" not in m and "enable_logging" not in m)

    monkeypatch.setattr(database_module, "open_database", logged)
    return seen


def _transactions(statements: list[str]) -> int:
    return sum(1 for s in statements if s.strip().upper().startswith("BEGIN"))


@pytest.mark.parametrize("verifier", ["lof", "grubbs"])
def test_a_release_on_the_bundled_data(statements, verifier):
    result = invoke("explain-outlier", QUERY, "--verifier", verifier, "--seed", "7", "--allow-seeded", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert len(statements) <= (12 if verifier == "lof" else 11), statements
    assert _transactions(statements) == 0  # the ledger is the per-user file: its own connection


def test_a_release_on_a_database_file(statements, tmp_path):
    path = tmp_path / "salaries.duckdb"
    con = duckdb.connect(str(path))
    load_dataset(con, "salaries")
    Ledger(con).set_limit("bundled:salaries", 5.0)
    con.close()
    result = invoke(
        "explain-outlier", QUERY, "--db", str(path), "--seed", "7", "--allow-seeded", "--format", "jsonl"
    )
    assert result.exit_code == 0, result.stderr
    assert len(statements) <= 30, statements
    assert _transactions(statements) == 2  # the reservation, then its outcome (both append to the chain)
    assert sum("pcor.leases" in s for s in statements) == 3  # the open check's, the lease taken, then removed


def test_the_readme_main_job_runs_at_most_20_statements_loading_included(monkeypatch, tmp_path):
    """The README's first command, counted from the connection's first statement: the demo
    database loads only the bundled table the query reads (DuckDB's own query log)."""
    import types

    seen: list[str] = []
    real_connect = duckdb.connect

    def connect(*args, **kwargs):
        con = real_connect(*args, **kwargs)
        con.execute("CALL enable_logging('QueryLog')")
        opened.append(con)
        return con

    opened: list = []
    monkeypatch.setattr(database_module, "duckdb", types.SimpleNamespace(connect=connect, Error=duckdb.Error,
                                                                         DuckDBPyConnection=duckdb.DuckDBPyConnection))

    @contextmanager
    def counted(path, reads=None):
        with open_database(path, reads) as con:
            yield con
            rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog' ORDER BY timestamp").fetchall()
            seen.extend(m for (m,) in rows if "duckdb_logs" not in m and "enable_logging" not in m)

    monkeypatch.setattr(database_module, "open_database", counted)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # the per-user ledger, as on a fresh machine
    monkeypatch.delenv("PCOR_SQL_LEDGER", raising=False)
    result = invoke("explain-outlier", QUERY, "--epsilon", "0.2")
    assert result.exit_code == 0, result.stderr
    assert not any("homicides" in m or "diamonds" in m for m in seen), seen
    print(f"README main job: {len(seen)} statements on the data connection")
    assert len(seen) <= 20, (len(seen), seen)
