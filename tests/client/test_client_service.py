"""`pcor_sql.connect` against the real service on a real uvicorn: the analyst handle's methods
over HTTP, and every refusal back as the in-process handle's exception, uncharged where nothing
was answered."""

from __future__ import annotations

import pytest

import pcor_sql
from pcor_sql_client import RemoteAnswer, RemoteExplanation
from pcor_sql.errors import BudgetExceeded, Refused, RequestFailed, UserError
from tests.client.served_dataset import ABSENT, OUTLIERS, TEXT_KEYS, served_dataset

FAST = {"epsilon": 0.1, "verifier": "grubbs"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("client") / "staff.duckdb", workers=4, processes=False) as s:
        yield s


@pytest.fixture
def alice(served):
    with pcor_sql.connect(served.url, served.tokens["alice"], timeout=60) as handle:
        yield handle


def test_datasets_name_what_may_be_asked(alice):
    found = {d["name"]: d for d in alice.datasets()}
    assert set(found) == {"staff", "tagged"}
    assert found["staff"]["key"] == "id" and found["staff"]["metrics"] == ["pay"]
    assert found["staff"]["domains"] == {"dept": ["a", "b", "c"], "year": ["2020", "2021"]}


def test_an_explanation_reads_like_the_in_process_one(alice):
    result = alice.explain_outlier("staff", OUTLIERS[0], **FAST)
    assert isinstance(result, RemoteExplanation)
    assert result.key == OUTLIERS[0] and result.dataset == "staff" and result.epsilon == pytest.approx(0.1)
    assert set(result.context) <= {"dept", "year"} and result.predicate is not None
    assert result.verifier.startswith("grubbs") and "pay" in result.explanation_sql
    assert result.summary and result.privacy_summary
    assert "5007" not in str(result.as_dict())  # the record's metric is not released


def test_results_come_in_the_order_of_the_keys_and_text_keys_work(alice):
    keys = [OUTLIERS[3], OUTLIERS[0], OUTLIERS[2]]
    assert [r.key for r in alice.explain_outliers("staff", keys, **FAST)] == keys
    assert alice.explain_outlier("tagged", TEXT_KEYS[1], **FAST).key == TEXT_KEYS[1]


def test_identify_answers_points_present_or_absent(alice):
    points = [{"pay": 5007.0}, {"pay": 104.0}, {"pay": -1e6}]
    answers = [alice.identify_value("staff", p, beta=2, radius=5, epsilon=0.1) for p in points]
    assert all(isinstance(a, RemoteAnswer) and type(a.anomaly) is bool for a in answers)
    assert [a.value for a in answers] == [a.key for a in answers] == points
    one = alice.identify_value("staff", {"pay": 5007.0}, beta=2, radius=5, epsilon=0.1, privacy="dp")
    assert one.privacy == "dp" and one.epsilon == pytest.approx(0.1)
    same = alice.identify_value("staff", {"pay": 5007.0}, beta=2, radius=5, epsilon=0.1, k=2)
    assert (same.value, same.k) == ({"pay": 5007.0}, 2)


def test_identify_by_key_answers_in_the_order_of_the_keys(alice):
    keys = [OUTLIERS[2], OUTLIERS[0]]
    answers = alice.identify_anomalies("staff", keys, beta=2, radius=5, epsilon=0.1)
    assert [a.key for a in answers] == keys and all(type(a.anomaly) is bool for a in answers)
    assert alice.identify_anomaly("tagged", TEXT_KEYS[0], beta=2, radius=5, epsilon=0.1).key == TEXT_KEYS[0]
    with pytest.raises(Refused, match="not among the releasable keys"):
        alice.identify_anomaly("staff", 100_000, beta=2, radius=5, epsilon=0.1)


def test_the_old_point_spellings_still_work_with_a_deprecation_warning(alice):
    with pytest.warns(DeprecationWarning, match="value= keyword"):
        old = alice.identify_anomaly("staff", value={"pay": 5007.0}, beta=2, radius=5, epsilon=0.1)
    with pytest.warns(DeprecationWarning, match="with points is deprecated"):
        [many] = alice.identify_anomalies("staff", [{"pay": 5007.0}], beta=2, radius=5, epsilon=0.1)
    assert old.value == many.value == {"pay": 5007.0}
    cost = alice.cost("identify_value", "staff", {"pay": 1.0}, beta=2, radius=5, epsilon=0.1)
    with pytest.warns(DeprecationWarning, match="RemoteCost"):
        assert cost["total"] == cost.total


def test_cost_is_a_preview_that_charges_nothing(served, alice):
    before = served.state()
    explain = alice.cost("explain_outliers", "staff", [OUTLIERS[0], OUTLIERS[1]], **FAST)
    one = alice.cost("explain_outlier", "staff", OUTLIERS[0], **FAST)
    identify = alice.cost("identify_value", "staff", {"pay": 1.0}, beta=2, radius=5, epsilon=0.1, privacy="dp")
    by_key = alice.cost("identify_anomalies", "staff", [OUTLIERS[0], OUTLIERS[1]], beta=2, radius=5, epsilon=0.1)
    assert served.state() == before
    assert (explain.notion, explain.count, explain.total) == ("ocdp", 2, pytest.approx(0.2))
    assert (one.count, identify.notion, identify.count, by_key.count) == (1, "dp", 1, 2)
    with pytest.raises(UserError, match="no cost preview"):
        alice.cost("coe", "staff", 1)
    with pytest.raises(Refused):  # the same checks as the request: a key outside the releasable set
        alice.cost("explain_outlier", "staff", 100_000, **FAST)


def test_me_and_history_are_the_analysts_own_and_agree(served):
    with pcor_sql.connect(served.url, served.tokens["alice"]) as alice:
        alice.explain_outlier("staff", OUTLIERS[1], **FAST)
        me, history = alice.me(), alice.history()
    assert me["analyst"] == "alice"
    spent = {u["notion"]: u["spent"] for u in me["usage"] if u["dataset"] is None}
    for notion, total in spent.items():
        assert total == pytest.approx(sum(h["epsilon"] for h in history if h["notion"] == notion), abs=1e-12)
    assert history and {h["outcome"] for h in history} <= {"answered", "failed"}
    assert all("unit" not in h for h in history)


@pytest.mark.parametrize(("token", "expected", "needle"), [
    ("carol", Refused, "not authenticated"),  # revoked
    ("pcor_" + "x" * 43, Refused, "not authenticated"),  # unknown
])
def test_a_bad_token_is_refused_with_the_services_words(served, token, expected, needle):
    with pcor_sql.connect(served.url, served.tokens.get(token, token)) as handle:
        with pytest.raises(expected, match=needle) as caught:
            handle.me()
    assert caught.value.status_code == 401 and caught.value.fix


def test_refusals_before_the_reservation_charge_nothing(served, alice):
    before = served.state()
    cases = [
        (lambda: alice.explain_outlier("staff", 100_000, **FAST), Refused),  # not releasable
        (lambda: alice.explain_outlier("staff", OUTLIERS[0], epsilon=1e-300), Refused),  # below the minimum ε
        (lambda: alice.explain_outlier("staff", OUTLIERS[0], epsilon=0.1, seed=1), UserError),  # owner's option
        (lambda: alice.explain_outlier("nowhere", 1, **FAST), UserError),
        (lambda: alice.explain_outlier("staff", OUTLIERS[0], epsilon=0.1, verifier="spy"), UserError),
        (lambda: alice.identify_value("staff", {"salary": 1.0}, beta=2, radius=5, epsilon=0.1), UserError),
    ]
    for call, expected in cases:
        with pytest.raises(expected) as caught:
            call()
        assert 400 <= caught.value.status_code < 500 and caught.value.status_code != 422
        assert caught.value.problem and "Traceback" not in str(caught.value)
    assert served.state() == before


def test_a_quota_reached_is_budget_exceeded_and_uncharged(served):
    with pcor_sql.connect(served.url, served.tokens["bob"]) as bob:
        bob.explain_outlier("staff", OUTLIERS[2], epsilon=0.2, verifier="grubbs")
        before = served.state()
        with pytest.raises(BudgetExceeded) as caught:
            bob.explain_outlier("staff", OUTLIERS[2], epsilon=0.1, verifier="grubbs")
        assert caught.value.status_code == 429
        assert served.state() == before


def test_a_failure_after_the_reservation_is_request_failed_and_charged(served, alice):
    before = served.state()
    with pytest.raises(RequestFailed) as caught:
        alice.explain_outlier("staff", ABSENT, **FAST)  # releasable, but no such row
    assert caught.value.status_code == 422
    history, _, _ = served.state()
    assert len(history) > len(before[0])


def test_sql_runs_a_statement_as_the_request_it_spells(served, alice):
    [explained] = alice.sql(f"EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = {OUTLIERS[1]} "
                            "USING grubbs WITH (epsilon = 0.1)")
    assert isinstance(explained, RemoteExplanation) and explained.key == OUTLIERS[1] and explained.context
    answers = alice.sql(f"IDENTIFY ANOMALY SELECT pay FROM staff WHERE id IN ({OUTLIERS[3]}, {OUTLIERS[0]}) "
                        "WITH (beta = 2, radius = 5, epsilon = 0.1)")
    assert [a.key for a in answers] == [OUTLIERS[3], OUTLIERS[0]] and all(isinstance(a, RemoteAnswer) for a in answers)
    [point] = alice.sql("IDENTIFY ANOMALY VALUE (pay = 5007) FROM staff WITH (beta = 2, radius = 5, epsilon = 0.1)")
    assert point.key == point.value == {"pay": 5007.0}
    history = alice.history(limit=4)
    assert [h["outcome"] for h in history] == ["answered"] * 4


@pytest.mark.parametrize(("text", "expected", "status"), [
    ("SELECT * FROM staff", Refused, 403),  # ordinary SQL is the owner's
    ("EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = 7 WITH (epsilon = 0.1, seed = 1)", Refused, 403),
    ("EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = 100000 WITH (epsilon = 0.1)", Refused, 403),
    ("EXPLAIN OUTLIER SELECT pay FROM nowhere WHERE id = 7 WITH (epsilon = 0.1)", Refused, 403),
    ("EXPLAIN OUTLIER SELEC pay FRM staff", UserError, 400),  # not SQL at all
    ("", UserError, 400),
])
def test_sql_refusals_are_4xx_with_a_fix_and_charge_nothing(served, alice, text, expected, status):
    before = served.state()
    with pytest.raises(expected) as caught:
        alice.sql(text)
    assert caught.value.status_code == status and caught.value.problem and caught.value.fix
    assert served.state() == before
