"""The privacy budget ledger: refusal at the limit, no charge on error, idempotency, history,
status, in-memory and read-only databases."""

from __future__ import annotations

import datetime as dt
import math

import duckdb
import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.ledger.store import (
    IN_MEMORY_WARNING,
    BudgetStatus,
    ChargeItem,
    Ledger,
)
from pcor_sql.errors import BudgetExceeded, InternalError, UserError

from ledger_helpers import charge, charge_items, check_fit, disk_full, ledger_rows


# ---- limits and refusal ------------------------------------------------------------------


def test_no_limit_until_one_is_set(ledger):
    assert ledger.status("salaries") == BudgetStatus("salaries", "ocdp", None, None, 0.0, None, 0)
    for _ in range(30):
        charge(ledger, "salaries", 0.5)
    status = ledger.status("salaries")
    assert status.limit is None and status.remaining is None
    assert status.spent == 15.0 and status.releases == 30


def test_refusal_at_the_limit(con, ledger):
    change = ledger.set_limit("salaries", 1.0)
    assert (change.limit, change.previous_limit, change.below_spent) == (1.0, None, False)
    totals = [charge(ledger, "salaries", 0.1) for _ in range(10)]
    # Compensated summation: the total is the correctly rounded sum, so ten 0.1 make exactly 1.0.
    assert totals[-1] == 1.0 == math.fsum([0.1] * 10)
    assert totals == sorted(totals)
    before = ledger_rows(ledger)
    with pytest.raises(BudgetExceeded) as refused:
        charge(ledger, "salaries", 0.1)
    assert "salaries" in str(refused.value) and "limit" in str(refused.value)
    assert refused.value.fix
    with pytest.raises(BudgetExceeded):  # past the slack of 1e-9 of the limit
        check_fit(ledger, "salaries", 2e-9)
    assert ledger_rows(ledger) == before
    assert ledger.status("salaries") == BudgetStatus("salaries", "ocdp", 1.0, "own", 1.0, 0.0, 10)


def test_a_charge_that_exactly_uses_the_remainder_passes(ledger):
    ledger.set_limit("d", 0.3)
    charge(ledger, "d", 0.1)
    check_fit(ledger, "d", 0.2)
    # 0.1 + 0.2 is 0.30000000000000004 in floats: the tolerance lets it fit a limit of 0.3.
    assert charge(ledger, "d", 0.2) == pytest.approx(0.3, abs=1e-15)
    with pytest.raises(BudgetExceeded):
        check_fit(ledger, "d", 1e-6)


def test_refused_charge_writes_nothing_and_names_the_headroom(con, ledger):
    ledger.set_limit("d", 1.0)
    charge(ledger, "d", 0.8)
    before = ledger_rows(ledger)
    with pytest.raises(BudgetExceeded) as refused:
        charge(ledger, "d", 0.5, release_id="big")
    assert "remaining 0.2)" in str(refused.value) and "use ε ≤ 0.2 or" in str(refused.value)
    assert ledger_rows(ledger) == before
    # Nothing of the refused release stuck: once the limit is raised it is charged normally.
    ledger.set_limit("d", 2.0)
    assert charge(ledger, "d", 0.5, release_id="big") == pytest.approx(1.3)
    assert [r.release_id for r in ledger.history("d")][-1] == "big"


def test_no_charge_when_the_release_fails_after_the_early_check(con, ledger):
    ledger.set_limit("d", 1.0)
    charge(ledger, "d", 0.25)
    before = ledger_rows(ledger)

    def release():
        check_fit(ledger, "d", 0.5)
        raise RuntimeError("the search crashed")  # the expensive work fails before the charge

    with pytest.raises(RuntimeError):
        release()
    assert ledger_rows(ledger) == before


def test_a_charge_failing_midway_leaves_the_ledger_untouched(ledger, monkeypatch):
    """The budget write fails after the history rows were appended: both are rolled back, and
    the failure is one line, not the store's raw exception."""
    ledger.set_limit("d", 1.0)
    charge(ledger, "d", 0.25)
    before = ledger_rows(ledger)

    def failing(self, *args):
        raise disk_full(ledger)

    monkeypatch.setattr(ledger.read_with(type), "update_budgets", failing)
    with pytest.raises(UserError, match="could not be written"):
        charge(ledger, "d", 0.5)
    monkeypatch.undo()
    assert ledger_rows(ledger) == before


def test_lowering_the_limit_below_spent_is_allowed_and_reported(ledger):
    ledger.set_limit("d", 2.0)
    charge(ledger, "d", 0.75)
    change = ledger.set_limit("d", 0.5)
    assert (change.previous_limit, change.spent, change.below_spent) == (2.0, 0.75, True)
    assert ledger.status("d").remaining == 0.0
    with pytest.raises(BudgetExceeded, match="used up"):
        charge(ledger, "d", 0.01)
    assert ledger.set_limit("d", 0.75).below_spent is False


def test_a_limit_can_be_cleared(ledger):
    ledger.set_limit("d", 2.0)
    change = ledger.set_limit("d", None)
    assert (change.limit, change.previous_limit, change.below_spent) == (None, 2.0, False)
    assert ledger.status("d").limit is None


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "1.0", None])
def test_limits_and_epsilons_are_validated(ledger, bad):
    if bad is not None:  # None clears a limit (test_a_limit_can_be_cleared)
        with pytest.raises(UserError):
            ledger.set_limit("d", bad)
    with pytest.raises(UserError):
        check_fit(ledger, "d", bad)
    with pytest.raises(UserError):
        charge(ledger, "d", bad)
    assert ledger.statuses() == ()


@pytest.mark.parametrize("bad", ["", "   ", None, 3, "a\x00b"])
def test_dataset_names_are_validated(ledger, bad):
    with pytest.raises(UserError):
        ledger.set_limit(bad, 1.0)
    with pytest.raises(UserError):
        charge(ledger, bad, 0.1)


# ---- idempotency and batches -------------------------------------------------------------


def test_a_release_is_never_charged_twice(con, ledger):
    ledger.set_limit("d", 1.0)
    assert charge(ledger, "d", 0.6, release_id="r1") == 0.6
    before = ledger_rows(ledger)
    # Retrying the same release (e.g. after a crash between charge and display) charges nothing,
    # and is not refused although a second 0.6 would not fit.
    assert charge(ledger, "d", 0.6, release_id="r1") == 0.6
    assert ledger_rows(ledger) == before
    with pytest.raises(InternalError):
        charge(ledger, "d", 0.3, release_id="r1")  # same id, a different release: a bug
    with pytest.raises(InternalError):
        charge(ledger, "other", 0.6, release_id="r1")


def test_a_batch_is_all_or_nothing(con, ledger):
    ledger.set_limit("d", 1.0)
    charge(ledger, "d", 0.5, release_id="first")
    before = ledger_rows(ledger)
    too_many = [ChargeItem(f"rec-{i}", OcdpCost(0.1), "sensitive", record_key=f"id = {i}") for i in range(6)]
    with pytest.raises(BudgetExceeded, match="6 releases"):
        charge_items(ledger, "d", too_many)
    assert ledger_rows(ledger) == before
    assert charge_items(ledger, "d", too_many[:5]) == 1.0
    history = ledger.history("d")
    assert [r.release_id for r in history] == ["first"] + [f"rec-{i}" for i in range(5)]
    assert [r.seq for r in history] == [1, 2, 3, 4, 5, 6]
    assert [r.spent_after for r in history] == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    # Re-sending the batch (with the already charged records) charges only what is new.
    ledger.set_limit("d", 2.0)
    assert charge_items(ledger, "d", too_many) == pytest.approx(1.1)
    assert ledger.status("d").releases == 7
    with pytest.raises(InternalError):  # an empty batch is a caller's bug
        charge_items(ledger, "d", [])
    with pytest.raises(InternalError):
        charge_items(ledger, "d", [ChargeItem("dup", OcdpCost(0.1), "m"), ChargeItem("dup", OcdpCost(0.1), "m")])


# ---- reading -----------------------------------------------------------------------------


def test_history_contents_and_order(ledger):
    started = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    charge_items(ledger, "a", [ChargeItem("a1", OcdpCost(0.2), "bfs", record_key="id = 1", statement="EXPLAIN OUTLIER ...")])
    charge_items(ledger, "b", [ChargeItem("b1", OcdpCost(0.3), "pareto")])
    charge_items(ledger, "a", [ChargeItem("a2", OcdpCost(0.1), "dfs", record_key="id = 2", statement=None)])
    ended = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    first, second = ledger.history("a")
    assert (first.release_id, first.unit, first.seq, first.mechanism) == ("a1", "a", 1, "bfs")
    assert (first.epsilon, first.record_key, first.statement, first.spent_after) == (
        0.2,
        "id = 1",
        "EXPLAIN OUTLIER ...",
        0.2,
    )
    assert (second.release_id, second.seq, second.mechanism, second.statement) == ("a2", 2, "dfs", None)
    assert second.spent_after == pytest.approx(0.3)
    assert started <= first.released_at <= second.released_at <= ended  # UTC
    assert [r.release_id for r in ledger.history()] == ["a1", "b1", "a2"]
    assert [r.release_id for r in ledger.history(limit=2)] == ["b1", "a2"]
    assert [r.release_id for r in ledger.history("a", limit=1)] == ["a2"]
    assert ledger.history("never") == ()
    with pytest.raises(UserError):
        ledger.history(limit=0)


def test_status_reports_remaining_and_counts(ledger):
    charge(ledger, "a", 0.25)
    charge(ledger, "a", 0.25)
    ledger.set_limit("b", 1.5)
    charge(ledger, "b", 0.5)
    assert ledger.statuses("ocdp") == (
        BudgetStatus("a", "ocdp", None, None, 0.5, None, 2),
        BudgetStatus("b", "ocdp", 1.5, "own", 0.5, 1.0, 1),
    )
    assert ledger.status("b").remaining == 1.0
    # Every notion is shown for every unit, each total on its own.
    assert [(s.unit, s.notion, s.spent) for s in ledger.statuses()] == [
        ("a", "dp", 0.0), ("a", "ocdp", 0.5), ("a", "sp", 0.0), ("b", "dp", 0.0), ("b", "ocdp", 0.5), ("b", "sp", 0.0)]


def test_the_callers_transaction_is_left_alone(con, ledger):
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE TABLE scratch (x INTEGER)")
    charge(ledger, "d", 0.5)  # committed on its own, inside the caller's open transaction
    con.execute("ROLLBACK")
    assert ledger.status("d").spent == 0.5
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'scratch'").fetchall() == [(0,)]


def test_use_of_another_database_cannot_move_the_ledger(con):
    con.execute("ATTACH ':memory:' AS scratch")
    con.execute("USE scratch")
    ledger = Ledger(con)
    charge(ledger, "d", 0.5)
    tables = con.execute(
        "SELECT DISTINCT database_name, schema_name FROM duckdb_tables() WHERE schema_name = 'pcor'"
    ).fetchall()
    assert tables == [("memory", "pcor")]  # the connection's own database, not the one in use
    con.execute("USE memory")
    con.execute("DETACH scratch")
    assert Ledger(con).status("d").spent == 0.5


# ---- in-memory and read-only databases ---------------------------------------------------


def test_in_memory_database_warns_once(con, tmp_path):
    messages: list[str] = []
    ledger = Ledger(con, warn=messages.append)
    charge(ledger, "d", 0.1)
    assert messages == [IN_MEMORY_WARNING]
    assert "in memory" in IN_MEMORY_WARNING and "--db FILE" in IN_MEMORY_WARNING and "\n" not in IN_MEMORY_WARNING
    assert ledger.in_memory and not ledger.read_only
    file_con = duckdb.connect(str(tmp_path / "kept.db"))
    file_messages: list[str] = []
    assert not Ledger(file_con, warn=file_messages.append).in_memory
    assert file_messages == []
    file_con.close()


def test_read_only_database_is_refused_before_any_work(tmp_path):
    path = tmp_path / "ro.db"
    writer = duckdb.connect(str(path))
    Ledger(writer).set_limit("d", 1.0)
    charge(Ledger(writer), "d", 0.25)
    writer.close()
    reader = connect_with_retry(path, read_only=True)
    ledger = Ledger(reader)
    assert ledger.read_only
    assert ledger.status("d") == BudgetStatus("d", "ocdp", 1.0, "own", 0.25, 0.75, 1)  # reading still works
    assert len(ledger.history("d")) == 1
    for attempt in (
        ledger.ensure_writable,
        lambda: check_fit(ledger, "d", 0.1),
        lambda: charge(ledger, "d", 0.1),
        lambda: ledger.set_limit("d", 2.0),
    ):
        with pytest.raises(UserError) as refused:
            attempt()
        assert not isinstance(refused.value, BudgetExceeded)
        assert "read-only" in refused.value.problem and str(path) in refused.value.problem
        assert refused.value.fix == "open it read-write"
    reader.close()


def test_read_only_database_without_a_ledger_reads_as_empty(tmp_path):
    path = tmp_path / "plain.db"
    writer = duckdb.connect(str(path))
    writer.execute("CREATE TABLE salaries (id INTEGER, salary DOUBLE)")
    writer.close()
    reader = duckdb.connect(str(path), read_only=True)
    ledger = Ledger(reader)
    assert ledger.statuses() == () and ledger.history() == ()
    assert ledger.status("d").spent == 0.0
    with pytest.raises(UserError, match="read-only"):
        check_fit(ledger, "d", 0.1)
    reader.close()


def test_opening_a_missing_file_read_only_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        connect_with_retry(tmp_path / "missing.db", read_only=True)


def test_a_charge_needs_a_typed_cost(ledger):
    with pytest.raises(InternalError, match="typed"):
        charge_items(ledger, "d", [ChargeItem("r", 0.5, "bfs")])
