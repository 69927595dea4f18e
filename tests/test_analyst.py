"""Analyst mode (DESIGN.md §6): only private statements over registered datasets, owner options
refused, reserve before read, one failure after the reservation whatever the data holds, and
only the key, the context and the privacy parameters released."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql.errors import BudgetExceeded, Refused, RequestFailed, UserError

ROWS = 120


def make_owner(drop: int | None = None, null_metric: int | None = None) -> pcor_sql.Owner:
    """A small table `people` (id, code, dept, year, pay): D, or D′ without row `drop`, or with a
    NULL pay for row `null_metric`. `code` is text holding a non-number in one row."""
    con = duckdb.connect()
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c'); CREATE TYPE yr AS ENUM ('2020', '2021')")
    con.execute(
        f"CREATE TABLE people AS SELECT i AS id, CASE WHEN i = 7 THEN 'x7' ELSE i::VARCHAR END AS code,"
        f" (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept, (['2020', '2021'])[i % 2 + 1]::yr AS year,"
        f" CASE WHEN i IN (42, 43) THEN 900.0 ELSE 100.0 + (i * 37 % 11) END AS pay FROM range({ROWS}) t(i)"
    )
    if drop is not None:
        con.execute(f"DELETE FROM people WHERE id = {drop}")
    if null_metric is not None:
        con.execute(f"UPDATE people SET pay = NULL WHERE id = {null_metric}")
    owner = pcor_sql.Owner(con, ":memory:", warn=lambda message: None)
    # Every key of D is releasable (declared as a list, so D′ without row `drop` declares the same set).
    owner.register("people", "people", key="id", metric="pay", by="dept,year", limit=1.0,
                   releasable=list(range(ROWS)))
    owner.register("coded", "people", key="code", metric="pay", by="dept,year", limit=1.0,
                   releasable=["x7" if i == 7 else str(i) for i in range(ROWS)])
    return owner


@pytest.fixture
def owner():
    return make_owner()


def test_a_release_returns_only_the_key_the_context_and_the_privacy_parameters(owner):
    analyst = owner.analyst()
    [result] = analyst.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 USING grubbs WITH (epsilon = 0.2)")
    shown = result.as_dict()
    assert set(shown) == {"dataset", "key", "metric", "context", "predicate", "explanation_sql", "epsilon",
                          "epsilon1", "accounting", "search", "samples", "verifier", "utility", "summary",
                          "privacy_summary"}
    assert shown["summary"].startswith("pay of record 42 of people is an outlier (Grubbs' test, alpha = 0.05) among")
    assert shown["privacy_summary"].startswith("privacy cost ε = 0.2 (output-constrained DP) over")
    assert shown["key"] == 42 and shown["dataset"] == "people"
    assert "pay" not in shown["context"] and "900" not in repr(shown)
    assert shown["explanation_sql"].startswith('SELECT "pay" FROM people')
    assert owner.spent("people") == pytest.approx(0.2)
    direct = analyst.explain_outlier("people", 42, epsilon=0.1, verifier="grubbs")
    assert set(direct.as_dict()) == set(shown)
    assert owner.spent("people") == pytest.approx(0.3)


def test_several_keys_cost_epsilon_each(owner):
    results = owner.analyst().sql(
        "EXPLAIN OUTLIER SELECT pay FROM people WHERE id IN (42, 42, 43) USING grubbs WITH (epsilon = 0.1)")
    assert [r.key for r in results] == [42, 43]
    assert owner.spent("people") == pytest.approx(0.2)


@pytest.mark.parametrize("text, kind", [
    ("SELECT * FROM people", Refused),
    ("DELETE FROM pcor.budget", Refused),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 WITH (seed = 7)", Refused),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 WITH (owner_view = TRUE)", Refused),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 WITH (dataset = 'people')", Refused),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 BY dept DOMAIN (dept IN ('a', 'b'))", Refused),
    ("EXPLAIN OUTLIER SELECT pay FROM main.people WHERE id = 42", UserError),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id > 42", UserError),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE dept = 'a'", UserError),
    ("EXPLAIN OUTLIER SELECT pay FROM (SELECT * FROM people) WHERE id = 42", UserError),
    ("EXPLAIN OUTLIER SELECT pay FROM nobody WHERE id = 42", UserError),
    ("EXPLAIN OUTLIER SELECT id FROM people WHERE id = 42", UserError),
    ("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 BY pay", UserError),
    ("IDENTIFY ANOMALY SELECT pay FROM people WHERE id = 42 WITH (beta = 2, radius = 1, epsilon = 0.1, seed = 1)",
     Refused),
])
def test_refusals_before_the_reservation_charge_nothing(owner, text, kind):
    with pytest.raises(kind):
        owner.analyst().sql(text)
    assert owner.ledger.history() == ()


@pytest.mark.parametrize("start, message", [
    ({"dept": ["z"]}, "'z' is not in the registered domain of 'dept'"),
    ({"region": ["a"]}, "not a context attribute"),
    ({"dept": []}, "a list of values"),
    ("dept IN ('a', 'z')", "'z' is not in the registered domain of 'dept'"),
])
def test_a_bad_start_is_refused_before_the_reservation(owner, start, message):
    # The domains are frozen at registration, so these checks read no data and cost nothing.
    with pytest.raises(UserError, match=message) as err:
        owner.analyst().explain_outlier("people", 42, start=start, verifier="grubbs", epsilon=0.1)
    assert not isinstance(err.value, RequestFailed)
    assert owner.ledger.history() == () and owner.spent("people") == 0.0


def test_a_start_in_the_domains_is_charged_and_used(owner):
    [result] = owner.analyst().sql(
        "EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 USING grubbs WITH (epsilon = 0.1, start = 'dept IN (''a'', ''b'')')")
    assert owner.spent("people") == pytest.approx(0.1) and result.context


def test_owner_fixed_accounting_cannot_be_changed(owner):
    owner.register("fixed", "people", key="id", metric="pay", by="dept", accounting="paper", releasable=[42])
    with pytest.raises(Refused, match="accounting"):
        owner.analyst().explain_outlier("fixed", 42, accounting="tight")
    [result] = owner.analyst().sql("EXPLAIN OUTLIER SELECT pay FROM fixed WHERE id = 42 USING grubbs")
    assert result.accounting == "paper"


def _failure(owner: pcor_sql.Owner, call) -> tuple[str, float]:
    with pytest.raises(RequestFailed) as failed:
        call(owner.analyst())
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
    return str(failed.value), owner.spent("people")


def test_failures_after_the_reservation_are_one_message_and_keep_the_charge():
    explain = lambda key: lambda a: a.explain_outlier("people", key, epsilon=0.25, verifier="grubbs")  # noqa: E731
    seen = {
        "missing key": _failure(make_owner(drop=42), explain(42)),
        "NULL metric": _failure(make_owner(null_metric=42), explain(42)),
        "no valid context": _failure(make_owner(), explain(3)),  # an ordinary record: an outlier nowhere
        "missing anomaly key": _failure(make_owner(drop=42), lambda a: a.identify_anomaly(
            "people", 42, beta=2, radius=1, epsilon=0.25)),
    }
    messages = {message for message, _ in seen.values()}
    assert len(messages) == 1, seen
    # Each was paid for: the data did not decide whether to charge.
    assert [spent for _, spent in seen.values()][:3] == [0.25, 0.25, 0.25]


def test_a_key_of_the_wrong_type_is_refused_before_the_reservation():
    """An integer key on a text key column used to reach SQL (`code IN (5)`: a conversion error
    after the charge); a string on an integer column passed the releasable check as text and then
    matched no row, recorded as answered (DESIGN.md §8 "Inputs are exact"). Both are refused first now, nothing charged."""
    owner = make_owner()
    for dataset, key in (("coded", 5), ("people", "42"), ("people", 42.0)):
        with pytest.raises(UserError, match="column"):
            owner.analyst().explain_outlier(dataset, key, epsilon=0.25, verifier="grubbs")
    assert owner.ledger.history() == ()


def test_an_exhausted_budget_reads_the_same_on_neighbouring_data():
    outcomes = []
    for owner in (make_owner(), make_owner(drop=42)):
        analyst = owner.analyst()
        for key in (42, 43):
            try:
                analyst.explain_outlier("people", key, epsilon=0.5, verifier="grubbs")
            except RequestFailed:
                pass
        with pytest.raises(BudgetExceeded) as refused:
            analyst.explain_outlier("people", 42, epsilon=0.5, verifier="grubbs")
        outcomes.append((str(refused.value), owner.spent("people")))
    assert outcomes[0] == outcomes[1]


def test_anomaly_answers_release_the_bit_and_the_parameters(owner):
    [answer] = owner.analyst().sql(
        "IDENTIFY ANOMALY SELECT pay FROM people WHERE id = 42 WITH (beta = 2, radius = 5, epsilon = 0.5)")
    assert set(answer.as_dict()) == {"dataset", "key", "columns", "anomaly", "epsilon", "privacy", "k", "beta",
                                     "radius", "norm", "summary", "privacy_summary"}
    assert owner.spent("people", "sp") == 0.5 and owner.spent("people", "ocdp") == 0.0
    assert owner.ledger.history()[0].role == "analyst"
