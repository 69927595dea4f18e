"""The analyst rules of DESIGN.md §6 on the in-process handle (the service runs the same handle):
a minimum ε per request, releasable keys frozen at registration, IDENTIFY ANOMALY by value,
plain exact-type input only, and the data-independent cost preview."""

from __future__ import annotations

import duckdb
import pytest

import pcor_sql
from pcor_sql import pipeline
from pcor_sql.analyst import Analyst
from pcor_sql.errors import Refused, RequestFailed, UserError
from tests.test_analyst import make_owner


@pytest.fixture
def owner():
    return make_owner()


def nothing_charged(owner) -> bool:
    return owner.ledger.history() == () and owner.spent("people") == 0.0 and owner.spent("people", "sp") == 0.0


@pytest.mark.parametrize("call", [
    lambda a: a.explain_outlier("people", 42, epsilon=1e-300, verifier="grubbs"),
    lambda a: a.explain_outlier("people", 42, epsilon=0.009, verifier="grubbs"),
    lambda a: a.identify_anomaly("people", 42, beta=2, radius=1, epsilon=1e-300),
    lambda a: a.identify_value("people", {"pay": 900}, beta=2, radius=1, epsilon=1e-300),
    lambda a: a.sql("IDENTIFY ANOMALY SELECT pay FROM people WHERE id = 42 WITH (beta = 2, radius = 1, epsilon = 1e-9)"),
])
def test_an_epsilon_below_the_minimum_is_refused_before_the_reservation(owner, call):
    with pytest.raises(Refused, match="below the smallest ε the data owner allows per request"):
        call(owner.analyst())
    assert nothing_charged(owner)


def test_the_owner_sets_the_minimum(owner):
    strict = Analyst(owner, pipeline.analyst_policy(min_epsilon=0.3))
    with pytest.raises(Refused, match=r"\(0.3\)"):
        strict.explain_outlier("people", 42, epsilon=0.2, verifier="grubbs")
    assert nothing_charged(owner)
    strict.explain_outlier("people", 42, epsilon=0.3, verifier="grubbs")
    owner.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42 USING grubbs WITH (epsilon = 0.001)")
    assert owner.spent("people") == pytest.approx(0.301)  # the owner has no minimum


def refusal(owner, key) -> str:
    with pytest.raises(Refused) as err:
        owner.analyst().explain_outlier("some", key, epsilon=0.1, verifier="grubbs")
    return str(err.value)


def test_keys_outside_the_releasable_set_get_one_message_whether_or_not_they_exist(owner):
    owner.register("some", "people", key="id", metric="pay", by="dept,year", releasable=[42, 43, 500])
    messages = {refusal(owner, key) for key in (7, 44, 119, 120, 9999, -1)}
    assert len(messages) == 1 and "not among the releasable keys of dataset 'some'" in messages.pop()
    for key in (3.5, "42x", 42.0):  # not integers: refused by type, before the set is even read
        with pytest.raises(UserError, match="integer column"):
            owner.analyst().explain_outlier("some", key, epsilon=0.1, verifier="grubbs")
    assert owner.ledger.history() == ()
    owner.analyst().explain_outliers("some", [43, 42], epsilon=0.1, verifier="grubbs")
    assert owner.spent("some") == pytest.approx(0.2)
    with pytest.raises(RequestFailed):  # declared releasable but absent: paid for, one generic failure
        owner.analyst().explain_outlier("some", 500, epsilon=0.1, verifier="grubbs")
    assert owner.spent("some") == pytest.approx(0.3)
    with pytest.raises(Refused):  # one key outside refuses the whole request
        owner.analyst().explain_outliers("some", [42, 7], epsilon=0.1, verifier="grubbs")
    assert owner.spent("some") == pytest.approx(0.3)


def test_without_a_declared_set_no_key_may_be_asked(owner):
    owner.register("closed", "people", key="id", metric="pay", by="dept")
    with pytest.raises(Refused, match="declared none, so no request may name a key"):
        owner.analyst().explain_outlier("closed", 42, epsilon=0.1)
    with pytest.raises(Refused, match="declared none"):
        owner.analyst().sql("IDENTIFY ANOMALY SELECT pay FROM closed WHERE id = 42 WITH (beta = 2, radius = 1, epsilon = 0.1)")
    assert owner.ledger.history() == ()
    assert owner.dataset("closed").releasable is None and owner.dataset("people").releasable == 120
    # A point may still be asked about: it names no record.
    assert owner.analyst().identify_value("closed", {"pay": 900}, beta=2, radius=1, epsilon=0.1).key == {"pay": 900}


def test_a_releasable_predicate_is_evaluated_once_and_frozen():
    owner = make_owner()
    found = owner.register("as", "people", key="id", metric="pay", by="dept,year", releasable="dept = 'a'")
    assert found.releasable == 40 and found.as_dict()["releasable_keys"] == 40
    owner.con.execute("UPDATE people SET dept = 'a' WHERE id = 1")  # later rows change nothing
    owner.analyst().explain_outlier("as", 42, epsilon=0.1, verifier="grubbs")  # 42 % 3 == 0: dept a
    with pytest.raises(Refused, match="not among the releasable keys"):
        owner.analyst().explain_outlier("as", 1, epsilon=0.1, verifier="grubbs")
    with pytest.raises(UserError, match="not a condition on people"):
        owner.register("bad", "people", key="id", metric="pay", by="dept", releasable="nope = 1")


def test_identify_value_answers_present_and_absent_points_and_charges_each(owner):
    analyst = owner.analyst()
    present = analyst.identify_value("people", {"pay": 900}, beta=2, radius=5, epsilon=0.5)
    absent = analyst.identify_value("people", {"pay": 123456.5}, beta=2, radius=5, epsilon=0.5, privacy="dp")
    [stated] = analyst.sql("IDENTIFY ANOMALY VALUE (pay = 900) FROM people WITH (beta = 2, radius = 5, epsilon = 0.5)")
    for answer in (present, absent, stated):
        assert set(answer.as_dict()) == {"dataset", "key", "columns", "anomaly", "epsilon", "privacy", "k", "beta",
                                         "radius", "norm", "summary", "privacy_summary"}
        assert type(answer.anomaly) is bool and answer.columns == ("pay",)
    assert stated.key == {"pay": 900.0} and absent.privacy == "dp"
    assert owner.spent("people", "sp") == pytest.approx(1.0) and owner.spent("people", "dp") == pytest.approx(0.5)
    history = owner.ledger.history()
    assert [h.record_key for h in history] == ["value (pay = 900.0)", "value (pay = 123456.5)", "value (pay = 900.0)"]


@pytest.mark.parametrize("value, message", [
    ({"id": 3}, "not a metric"),
    ({"pay": float("nan")}, "finite"),
    ({"pay": "900"}, "finite number"),
    ({"pay": True}, "finite number"),
    ({}, "map metric columns"),
    ([900], "map metric columns"),
])
def test_a_bad_value_is_refused_before_the_reservation(owner, value, message):
    with pytest.raises(UserError, match=message):
        owner.analyst().identify_value("people", value, beta=2, radius=5, epsilon=0.5)
    assert nothing_charged(owner)


def test_the_owner_is_told_the_value_form_is_the_analysts(owner):
    with pytest.raises(UserError, match="analyst's statement"):
        owner.sql("IDENTIFY ANOMALY VALUE (pay = 900) FROM people WITH (beta = 2, radius = 5, epsilon = 0.5)")


class Key(int):
    def __str__(self):
        return "42); UPDATE pcor.budget SET spent_epsilon = 0; --"

    __repr__ = __format__ = lambda self, *a: str(self)  # noqa: E731


class Name(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class Spy:
    calls = 0

    def __call__(self, *args, **kwargs):
        Spy.calls += 1
        return True


@pytest.mark.parametrize("call", [
    lambda a: a.explain_outlier("people", Key(42), epsilon=0.1, verifier="grubbs"),
    lambda a: a.explain_outliers("people", [42, Key(43)], epsilon=0.1, verifier="grubbs"),
    lambda a: a.explain_outliers("people", type("L", (list,), {})([42]), epsilon=0.1),
    lambda a: a.explain_outlier(Name("people"), 42, epsilon=0.1, verifier="grubbs"),
    lambda a: a.explain_outlier("people", 42, epsilon=0.1, verifier=Spy()),
    lambda a: a.explain_outlier("people", 42, epsilon=0.1, metric=Name("id")),
    lambda a: a.explain_outlier("people", 42, epsilon=type("F", (float,), {})(0.1)),
    lambda a: a.identify_value("people", {Name("pay"): 900}, beta=2, radius=5, epsilon=0.5),
    lambda a: a.sql(Name("EXPLAIN OUTLIER SELECT pay FROM people WHERE id = 42")),
])
def test_only_plain_exact_types_are_accepted(owner, call):
    with pytest.raises(UserError, match="plain"):
        call(owner.analyst())
    assert nothing_charged(owner) and Spy.calls == 0


def test_the_cost_preview_charges_nothing_and_matches_the_charge(owner):
    analyst = owner.analyst()
    cost = analyst.cost("explain_outliers", "people", [42, 43], epsilon=0.2, verifier="grubbs")
    assert cost.as_dict() == {"notion": "ocdp", "epsilon": 0.2, "k": None, "count": 2, "total": pytest.approx(0.4)}
    point = analyst.cost("identify_value", "people", {"pay": 5.5}, beta=2, radius=5, epsilon=0.5, k=2)
    assert (point.notion, point.k, point.total) == ("sp", 2, 0.5)
    assert nothing_charged(owner)
    with pytest.raises(Refused):  # the same checks as the request
        analyst.cost("explain_outliers", "people", [9999], epsilon=0.2)
    with pytest.raises(Refused, match="below"):
        analyst.cost("identify_value", "people", {"pay": 5.5}, beta=2, radius=5, epsilon=1e-5)
    analyst.explain_outliers("people", [42, 43], epsilon=0.2, verifier="grubbs")
    assert owner.spent("people") == pytest.approx(cost.total)


def test_results_come_back_in_the_order_of_the_keys_given():
    """The table's first column is the metric, so storage or ORDER BY ALL would sort by pay."""
    con = duckdb.connect()
    con.execute("CREATE TYPE d AS ENUM ('a', 'b'); CREATE TABLE s AS SELECT (1000 - i * 7 % 97)::DOUBLE AS pay,"
                " i AS id, (['a', 'b'])[i % 2 + 1]::d AS dept FROM range(60) r(i)")
    owner = pcor_sql.Owner(con, ":memory:", warn=lambda m: None)
    owner.register("s", "s", key="id", metric="pay", by="dept", releasable="TRUE")
    keys = [31, 5, 47, 12, 0]
    answers = owner.analyst().identify_anomalies("s", keys, beta=2, radius=1, epsilon=0.1)
    assert [a.key for a in answers] == keys
