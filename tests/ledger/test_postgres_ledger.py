"""The PostgreSQL store's own facts (DESIGN.md §11): a ledger named by a URL wherever a ledger is
given; one data file, one ledger (the file's marker, the embedded ledger refused once marked, a
file with its own charges refused until moved); the move keeps the history, verified; a
password never shown; serialization failures retried by SQLSTATE class."""

from __future__ import annotations

import threading
import warnings

import duckdb
import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import PrivacyWarning, UserError
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.location import open_ledger
from pcor_sql.ledger.postgres_store import PostgresStore, redacted
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger



def invoke(*args: str):
    from typer.testing import CliRunner

    from pcor_sql.cli.main import app

    return CliRunner().invoke(app, list(args))


def item(epsilon: float) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", "id = 42")


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i AS id, i % 3 AS dept, 100.0 + i AS pay FROM range(30) s(i)")
    con.close()
    return path


def test_a_database_lent_again_holds_an_empty_ledger_of_its_own(postgres_server):
    """The tests' server (tests/postgres_server.py) lends a used database again only as a new copy
    of the template would be: no rows, a new ledger id, no connection of the last test left (one
    holding a row lock would block the next charge); one whose columns a test changed, never."""
    import psycopg

    url = postgres_server.fresh_url()
    ledger = Ledger(store=PostgresStore(url))
    ledger.set_limit("d", 1.0)
    ledger.reserve("d", [item(0.5)]).answered()
    first_id = ledger.store.ledger_id()
    left_open = psycopg.connect(url)
    left_open.execute("SELECT * FROM pcor.budget FOR UPDATE")  # a transaction left holding the row
    postgres_server.take_back()
    assert postgres_server.fresh_url() == url
    again = Ledger(store=PostgresStore(url, busy_timeout=5.0))
    assert again.history() == () and again.status("d").limit is None and again.store.ledger_id() != first_id
    again.set_limit("d", 1.0)
    again.reserve("d", [item(0.5)]).answered()  # the lock went with the ended connection
    assert again.status("d").spent == 0.5 and again.verify() == []
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("ALTER TABLE pcor.units ADD COLUMN extra integer")
    for handle in (ledger, again):
        handle.close()
    left_open.close()
    postgres_server.take_back()
    assert postgres_server.fresh_url() != url


def test_a_url_names_a_postgresql_ledger_for_in_memory_data(postgres_server, monkeypatch):
    url = postgres_server.fresh_url()
    con = duckdb.connect()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # not in memory: no warning
        ledger = open_ledger(con, url)
        assert ledger.kind == "postgresql" and not ledger.in_memory
        ledger.set_limit("memory.main.t", 1.0)
        monkeypatch.setenv("PCOR_SQL_LEDGER", url)
        assert open_ledger(con).status("memory.main.t").limit == 1.0  # $PCOR_SQL_LEDGER too


def test_an_empty_database_gets_the_ledgers_tables(postgres_server):
    ledger = Ledger(store=PostgresStore(postgres_server.empty_url()))
    ledger.reserve("t", [item(0.25)]).answered()
    assert ledger.status("t").spent == 0.25 and ledger.verify() == []


def test_the_password_is_never_shown():
    assert redacted("postgresql://owner:s3cret@db.internal:5433/pcor") == "postgresql://owner@db.internal:5433/pcor"
    with pytest.raises(UserError) as refused:
        PostgresStore("postgresql://owner:s3cret@127.0.0.1:1/pcor")
    assert "s3cret" not in str(refused.value) and "cannot reach" in str(refused.value)


def test_one_data_file_one_ledger(postgres_server, data_file):
    """A file charged in its own ledger is refused with a server ledger until moved; the move keeps
    the history (verified) and marks the file; then only that server ledger opens it."""
    url, other = postgres_server.fresh_url(), postgres_server.fresh_url()
    charge = ["explain-outlier", "SELECT pay FROM t WHERE id = 3", "--by", "dept", "--epsilon", "0.2",
              "--verifier", "grubbs", "--db", str(data_file)]
    assert invoke("budget", "set-limit", "t", "2.0", "--db", str(data_file)).exit_code == 0
    invoke(*charge)
    before = [(r.unit, r.epsilon, r.outcome, r.refunded, r.statement) for r in _embedded(data_file).history()]
    assert before
    refused = invoke("budget", "status", "--db", str(data_file), "--ledger", url)
    assert refused.exit_code == 2 and "budget migrate" in refused.stderr
    moved = invoke("budget", "migrate", "--db", str(data_file), "--to", url)
    assert moved.exit_code == 0 and "verified" in moved.stdout, moved.stderr
    shared = Ledger(store=PostgresStore(url))
    assert [(r.unit, r.epsilon, r.outcome, r.refunded, r.statement) for r in shared.history()] == before
    assert shared.verify() == [] and shared.status("main.t").limit == 2.0
    embedded = invoke("budget", "status", "--db", str(data_file))
    assert embedded.exit_code == 2 and url in embedded.stderr  # refused, naming the server ledger
    assert invoke("budget", "status", "--db", str(data_file), "--ledger", other).exit_code == 2
    assert invoke(*charge, "--ledger", url).exit_code in (0, 2)  # answered, or no valid context (refunded)
    assert len(shared.history()) == len(before) + 1 and shared.verify() == []
    again = invoke("budget", "migrate", "--db", str(data_file), "--to", url)
    assert again.exit_code == 2  # the file's embedded ledger is no longer used


def _embedded(path) -> Ledger:
    return Ledger(duckdb.connect(str(path)), owned=True)


def test_a_file_without_a_ledger_is_marked_when_first_used_with_a_server_ledger(postgres_server, data_file):
    url = postgres_server.fresh_url()
    assert invoke("budget", "set-limit", "t", "1.0", "--db", str(data_file), "--ledger", url).exit_code == 0
    refused = invoke("budget", "status", "--db", str(data_file))
    assert refused.exit_code == 2 and url in refused.stderr


def test_serialization_failures_are_retried(postgres_server):
    """A writer holding the budget row in a serializable transaction makes the charge fail with
    SQLSTATE 40001 once it commits; the charge runs again and sees its spend."""
    import psycopg

    url = postgres_server.fresh_url()
    ledger = Ledger(store=PostgresStore(url))
    ledger.set_limit("d", 1.0)
    ledger.reserve("d", [item(0.5)]).answered()
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        other.execute("SELECT spent_epsilon FROM pcor.budget WHERE unit = 'd'")
        other.execute("UPDATE pcor.budget SET spent_epsilon = 0.9, spent_residual = 0 WHERE unit = 'd'")
        outcome = []
        worker = threading.Thread(target=lambda: outcome.append(_try(ledger, 0.3)))
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive()  # waiting on the row lock
        other.execute("COMMIT")
        worker.join(timeout=30)
    assert outcome == ["refused"]  # re-run from a fresh snapshot: 0.9 + 0.3 > 1.0


def test_a_charge_queued_behind_a_held_row_is_not_busy(postgres_server):
    """A holder that keeps the budget row locked for longer than `busy_timeout` (a host cut off
    mid-transaction keeps it until the server ends that session, DESIGN.md §11 "Faults") and then
    commits: the queued charge fails once with 40001 and is run again — the wait is not
    conflicts, so it is charged, not refused as "stayed busy" (it was, before)."""
    import psycopg

    url = postgres_server.fresh_url()
    ledger = Ledger(store=PostgresStore(url, busy_timeout=1.0))
    ledger.set_limit("d", 1.0)
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        other.execute("UPDATE pcor.budget SET spent_epsilon = 0.5, spent_residual = 0 WHERE unit = 'd'")
        outcome = []
        worker = threading.Thread(target=lambda: outcome.append(_try(ledger, 0.3)))
        worker.start()
        worker.join(timeout=2.0)  # twice busy_timeout
        assert worker.is_alive()  # still waiting on the row lock
        other.execute("COMMIT")
        worker.join(timeout=30)
    assert outcome == ["charged"]


def _try(ledger: Ledger, epsilon: float) -> str:
    from pcor_sql.errors import BudgetExceeded

    try:
        ledger.reserve("d", [item(epsilon)]).answered()
        return "charged"
    except BudgetExceeded:
        return "refused"
    except UserError as exc:
        return str(exc)
