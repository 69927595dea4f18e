"""The history is the truth: a total that differs from it (a hand edit, a lost write) is found
when a ledger is opened, and charges are refused until `repair` resets the totals from it."""

from __future__ import annotations

import duckdb
import pytest

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import Refused
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.consistency import Mismatch
from pcor_sql.ledger.history_chain import ChainDifference
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger

from ledger_helpers import charge, raw

pytestmark = pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")


def item(epsilon: float, **extra) -> ChargeItem:
    return ChargeItem(new_release_id(), OcdpCost(epsilon), "pcor/bfs/tight", **extra)


@pytest.fixture
def opener(store_kind, tmp_path, request):
    """`opener()`: a new handle on one kept ledger (a file, or a PostgreSQL database), on each store."""
    opened: list[Ledger] = []
    if store_kind == "duckdb":
        path = tmp_path / "ledger.duckdb"

        def make() -> Ledger:
            return Ledger(duckdb.connect(str(path)), owned=True)
    else:
        from pcor_sql.ledger.postgres_store import PostgresStore

        url = request.getfixturevalue("postgres_server").fresh_url()

        def make() -> Ledger:
            return Ledger(store=PostgresStore(url))

    def open_ledger() -> Ledger:
        opened.append(make())
        return opened[-1]

    yield open_ledger
    for handle in opened:
        handle.close()


@pytest.fixture
def file_ledger(opener):
    """A kept ledger with t charged 0.3 of 1.0 (and u 0.2, no limit), closed."""
    ledger = opener()
    ledger.set_limit("t", 1.0)
    ledger.set_limit("u", 1.0)
    ledger.reserve("t", [item(0.1)]).answered()
    ledger.reserve("t", [item(0.2)]).answered()
    ledger.reserve(["t", "u"], [item(0.05)]).failed("data", refund=True)
    charge(ledger, "u", 0.2)
    ledger.close()
    return opener


def test_a_consistent_ledger_verifies(file_ledger):
    ledger = file_ledger()
    assert ledger.mismatches == () and ledger.verify() == []
    ledger.reserve("t", [item(0.1)]).answered()


def test_a_hand_edit_of_the_budget_refuses_releases_until_repair(file_ledger):
    edit = file_ledger()
    raw(edit, "UPDATE pcor.budget SET spent_epsilon = 0 WHERE unit = 't'")  # "reset" the budget by hand
    edit.close()
    ledger = file_ledger()
    assert ledger.verify() == [Mismatch("t", "ocdp", pytest.approx(0.0, abs=1e-15), pytest.approx(0.3))]
    assert ledger.mismatches == tuple(ledger.verify())
    for attempt in (lambda: ledger.reserve("t", [item(0.1)]), lambda: charge(ledger, "u", 0.1)):
        with pytest.raises(Refused) as refused:
            attempt()
        assert "pcor-sql budget verify" in str(refused.value) and "pcor-sql budget repair" in str(refused.value)
        assert "\n" not in str(refused.value)
    assert ledger.status("t").spent == 0.0  # reading still works: the owner must be able to look
    # Another handle on the same file is refused too: the refusal is kept in the ledger itself.
    with pytest.raises(Refused):
        file_ledger().reserve("u", [item(0.1)])
    assert [m.unit for m in ledger.repair()] == ["t"]
    assert ledger.verify() == [] and ledger.status("t").spent == pytest.approx(0.3)
    assert ledger.status("t").limit == 1.0  # the limit is not in the history: left alone
    ledger.reserve("t", [item(0.7)]).answered()  # exactly up to the limit again, no further
    with pytest.raises(Exception, match="exceed|used up"):
        ledger.reserve("t", [item(0.01)])


def test_lost_history_and_lost_budget_rows_are_found(file_ledger):
    edit = file_ledger()
    raw(edit, "DELETE FROM pcor.history WHERE unit = 'u' AND NOT refunded")  # the 0.2 charge's row
    raw(edit, "DELETE FROM pcor.budget WHERE unit = 't'")
    edit.close()
    ledger = file_ledger()
    found = ledger.verify()
    assert sorted(m for m in found if isinstance(m, Mismatch)) == [Mismatch("t", "ocdp", 0.0, pytest.approx(0.3)),
                                                                  Mismatch("u", "ocdp", pytest.approx(0.2), 0.0)]
    [lost] = [d for d in found if isinstance(d, ChainDifference)]
    assert (lost.unit, lost.problem) == ("u", "is missing from the history (deleted): the chain holds it")
    ledger.repair()
    assert ledger.verify() == []
    # The history's chain holds the deleted row (DESIGN.md §11): it is put back, still charged.
    assert (ledger.status("t").spent, ledger.status("u").spent) == (pytest.approx(0.3), pytest.approx(0.2))
    assert ledger.status("t").limit is None  # a deleted row's limit is gone: the owner sets it again


def test_an_edited_quota_is_found_and_repaired(opener):
    ledger = opener()
    raw(ledger, "INSERT INTO pcor.analysts VALUES ('ana', 'x', NULL, now()::TIMESTAMP, NULL)")
    for eps in (0.1, 0.2):
        ledger.reserve(["t1", "t2"], [item(eps, role="analyst", dataset="people")], analyst="ana").answered()
    assert ledger.verify() == []  # one release charged to two units counts once against the quota
    raw(ledger, "UPDATE pcor.quotas SET spent_epsilon = 0.05 WHERE analyst = 'ana' AND dataset = ''")
    ledger.close()
    ledger = opener()
    assert ledger.verify() == [Mismatch("analyst:ana", "ocdp", pytest.approx(0.05), pytest.approx(0.3))]
    ledger.repair()
    assert ledger.verify() == []
    assert raw(ledger, "SELECT dataset, spent_epsilon, releases FROM pcor.quotas ORDER BY dataset") == [
        ("", pytest.approx(0.3), 2), ("people", pytest.approx(0.3), 2)]


def test_refunds_and_many_small_charges_stay_consistent(ledger):
    for i in range(60):
        r = ledger.reserve("t", [item(0.001 * (1 + i % 7))])
        r.failed("data", refund=True) if i % 5 == 0 else r.answered()
    assert ledger.verify() == []


def test_a_difference_below_the_tolerance_is_rounding_and_above_it_is_not(ledger, reopen):
    for _ in range(10):
        charge(ledger, "t", 0.1)
    raw(ledger, "UPDATE pcor.budget SET spent_epsilon = spent_epsilon + 1e-13")  # rounding-sized
    assert reopen().verify() == []
    raw(ledger, "UPDATE pcor.budget SET spent_epsilon = spent_epsilon + 1e-8")  # a lost charge of 1e-8
    assert [m.unit for m in reopen().verify()] == ["t"]
