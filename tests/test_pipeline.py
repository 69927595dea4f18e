"""The one release path (pcor_sql.pipeline): what the owner's and the analyst's policies change,
measured on the ledger — charges, refunds, outcomes — and on what the caller sees."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql import pipeline
from pcor_sql.errors import BudgetExceeded, Interrupted, NoValidContext, PrivacyWarning, RequestFailed, UserError
from pcor_sql.owner import Owner
from pcor_sql.session import Session

QUERY = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture()
def owner():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        o = Owner(con, ":memory:")
    o.register("salaries", "salaries", key="id", metric="salary", by="job_title,year", limit=5.0)
    yield o
    con.close()


def _spent(owner):
    return owner.spent("salaries")


def _outcomes(owner):
    return [(r.outcome, r.refunded) for r in owner.ledger.history()]


def test_an_owner_failure_after_the_reservation_is_refunded(owner, monkeypatch):
    def no_context(*args, **kwargs):
        raise NoValidContext("nothing valid", "try another verifier")

    monkeypatch.setattr(Session, "prepare_records", no_context)
    with pytest.raises(NoValidContext):  # the owner's error is the detailed one
        owner.explain_outlier(QUERY, epsilon=0.3)
    assert _spent(owner) == 0.0
    assert _outcomes(owner) == [("failed", True)]


def test_an_analyst_failure_after_the_reservation_stays_charged_and_is_generic(owner, monkeypatch):
    def no_context(*args, **kwargs):
        raise NoValidContext("nothing valid for salary 187190.79", "try another verifier")

    monkeypatch.setattr(Session, "prepare_records", no_context)
    with pytest.raises(RequestFailed) as err:
        owner.analyst().explain_outlier("salaries", 42, epsilon=0.3)
    assert "187190" not in str(err.value) and err.value.__cause__ is None
    assert _spent(owner) == pytest.approx(0.3)
    assert _outcomes(owner) == [("failed", False)]


@pytest.mark.parametrize(("analyst", "message", "spent"), [
    (False, "interrupted: not charged", 0.0),
    (True, "interrupted: ε = 0.3 stays charged", 0.3),
])
def test_ctrl_c_says_what_the_ledger_kept(owner, monkeypatch, analyst, message, spent):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "prepare_records", interrupt)
    with pytest.raises(Interrupted) as err:
        if analyst:
            owner.analyst().explain_outlier("salaries", 42, epsilon=0.3)
        else:
            owner.explain_outlier(QUERY, epsilon=0.3)
    assert err.value.message == message
    assert _spent(owner) == pytest.approx(spent)
    assert _outcomes(owner) == [("interrupted", not analyst)]


def test_a_selector_over_max_records_is_refused_before_any_charge_with_the_total(owner):
    with pytest.raises(UserError, match=r"picks 3 rows: 3 releases of ε = 0.2, 0.6 in total") as err:
        owner.explain_outliers("SELECT salary FROM salaries WHERE id IN (42, 43, 44)", max_records=2)
    assert "max_records=3" in err.value.fix
    assert _spent(owner) == 0.0 and owner.ledger.history() == ()


def test_a_huge_epsilon_is_warned_about(owner):
    owner.set_limit("salaries", 50.0)
    with pytest.warns(PrivacyWarning, match="protects almost nothing"):
        owner.explain_outlier(QUERY, epsilon=11.0, verifier="grubbs", search="direct", by="job_title,year")


def test_analyst_results_come_in_the_order_of_the_keys_given(owner):
    keys = [171, 42]  # both planted outliers (a key with no valid context fails the batch)
    results = owner.analyst().explain_outliers("salaries", keys, epsilon=0.3, verifier="grubbs", search="direct")
    assert [r.key for r in results] == keys


def test_the_policies_differ_only_in_what_they_say():
    assert pipeline.OWNER.refunds_failures and pipeline.OWNER.reads_before_reserving
    analyst = pipeline.analyst_policy("ana")
    assert not analyst.refunds_failures and analyst.generic_failures and analyst.analyst == "ana"
    assert analyst.min_epsilon == pipeline.DEFAULT_MIN_EPSILON


def test_a_refused_reservation_charges_nothing(owner):
    owner.set_limit("salaries", 0.1)
    with pytest.raises(BudgetExceeded):
        owner.explain_outlier(QUERY, epsilon=0.3)
    assert owner.ledger.history() == ()
