"""One conformance check of the analyst interface (`pcor_sql_client.analyst_interface`, DESIGN.md
§8 "The analyst's client"), in the manner of scikit-learn's estimator checks: the same assertions,
run against the in-process `Analyst` and a `RemoteAnalyst` talking to the real service on
127.0.0.1, for every method of `AnalystInterface`. Both handles are analyst alice on one ledger:
same names, same parameters, same meanings, same result shapes, same refusals, and a preview or
a refusal charges nothing on either."""

from __future__ import annotations

import inspect

import pytest

import pcor_sql
from pcor_sql import pipeline
from pcor_sql.analyst import Analyst
from pcor_sql.errors import Refused, RequestFailed, UserError
from pcor_sql_client import AnalystInterface, Answer, Cost, Explanation, RemoteAnalyst
from pcor_sql_client.analyst_interface import PRICED, NotReleased
from tests.client.served_dataset import ABSENT, OUTLIERS, RELEASABLE, TEXT_KEYS, served_dataset

FAST = {"epsilon": 0.1, "verifier": "grubbs"}
ANOMALY = {"beta": 2, "radius": 5, "epsilon": 0.1}
#: The methods `AnalystInterface` declares (its own, not Protocol's machinery).
METHODS = sorted(name for name, member in vars(AnalystInterface).items()
                 if callable(member) and not name.startswith("_"))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_dataset(tmp_path_factory.mktemp("conformance") / "staff.duckdb", workers=2, processes=False) as s:
        yield s


def in_process(served) -> Analyst:
    """Analyst alice in-process, under the service's policy (its default minimum ε and work cap)."""
    return Analyst(served.owner, pipeline.analyst_policy("alice", min_epsilon=pipeline.DEFAULT_MIN_EPSILON,
                                                         max_work=pipeline.DEFAULT_MAX_WORK))


@pytest.fixture(params=["in-process", "remote"])
def handle(request, served):
    """Analyst alice, in-process or remote."""
    if request.param == "in-process":
        yield in_process(served)
    else:
        with pcor_sql.connect(served.url, served.tokens["alice"], timeout=60) as remote:
            yield remote


def test_the_interface_declares_every_method_the_issue_names():
    assert METHODS == sorted(["cost", "datasets", "explain_outlier", "explain_outliers", "history", "identify_anomalies",
                              "identify_anomaly", "identify_value", "me", "releasable_keys", "sql"])


@pytest.mark.parametrize("cls", [Analyst, RemoteAnalyst], ids=["in-process", "remote"])
@pytest.mark.parametrize("name", METHODS)
def test_each_method_has_the_interfaces_parameters(cls, name):
    declared = inspect.signature(getattr(AnalystInterface, name)).parameters
    given = inspect.signature(getattr(cls, name)).parameters
    assert [(p.name, p.kind) for p in given.values()] == [(p.name, p.kind) for p in declared.values()], name
    assert [p.default for p in given.values() if p.name not in ("point", "key")] == \
        [p.default for p in declared.values() if p.name not in ("point", "key")], name


def test_each_handle_is_an_analyst_interface(handle):
    assert isinstance(handle, AnalystInterface)


def test_datasets_are_the_registered_ones_with_their_frozen_domains(handle):
    found = {d["name"]: d for d in handle.datasets()}
    assert set(found) == {"staff", "tagged"}
    assert set(found["staff"]) == {"name", "key", "metrics", "attributes", "domains", "releasable_keys", "accounting"}
    assert (found["staff"]["key"], found["staff"]["metrics"], found["tagged"]["key"]) == ("id", ["pay"], "tag")
    assert found["staff"]["domains"] == {"dept": ["a", "b", "c"], "year": ["2020", "2021"]}
    assert found["staff"]["releasable_keys"] == len(RELEASABLE)


def test_me_names_the_analyst_their_bounds_and_usage(handle):
    me = handle.me()
    assert set(me) == {"analyst", "datasets", "min_epsilon", "max_keys", "max_work", "usage"}
    assert (me["analyst"], me["datasets"]) == ("alice", None)
    assert me["min_epsilon"] == pipeline.DEFAULT_MIN_EPSILON and me["max_work"] == pipeline.DEFAULT_MAX_WORK
    overall = {u["notion"]: u for u in me["usage"] if u["dataset"] is None}
    assert set(overall) == {"ocdp", "dp", "sp"} and all(u["limit"] == 5.0 for u in overall.values())


def test_history_shows_the_analysts_own_requests_paged(handle):
    handle.explain_outliers("staff", [OUTLIERS[3], OUTLIERS[2]], **FAST)
    [last] = handle.history(limit=1)
    assert (last["dataset"], last["outcome"], last["notion"]) == ("staff", "answered", "ocdp")
    assert last["epsilon"] == pytest.approx(0.1)
    two = handle.history(limit=2)
    assert two[-1] == last and len(two) == 2
    assert handle.history(limit=1, before=last["release_id"]) == two[:1]
    with pytest.raises(UserError):
        handle.history(limit=0)


def test_releasable_keys_are_paged_in_their_frozen_order(handle):
    every = handle.releasable_keys("staff", 1000)
    assert (every["total"], sorted(every["keys"])) == (len(RELEASABLE), sorted(RELEASABLE))
    page = handle.releasable_keys("staff", 3, 1)
    assert page == {"dataset": "staff", "total": len(RELEASABLE), "offset": 1, "keys": every["keys"][1:4]}
    assert sorted(handle.releasable_keys("tagged")["keys"]) == sorted(TEXT_KEYS)


def test_explain_outlier_releases_the_key_context_and_privacy_parameters(handle):
    result = handle.explain_outlier("staff", OUTLIERS[0], **FAST)
    assert isinstance(result, Explanation)
    assert (result.dataset, result.key, result.epsilon) == ("staff", OUTLIERS[0], pytest.approx(0.1))
    assert set(result.context) <= {"dept", "year"} and isinstance(result.predicate, str)
    assert result.summary and result.privacy_summary
    shown = result.as_dict()
    assert {"metric", "explanation_sql", "epsilon1", "accounting", "search", "samples", "verifier", "utility"} <= set(shown)
    assert "5000" not in str(shown)  # the record's metric is not released


def test_explain_outliers_answer_in_the_order_of_the_keys(handle):
    keys = [OUTLIERS[3], OUTLIERS[1]]
    results = handle.explain_outliers("staff", keys, **FAST)
    assert [r.key for r in results] == keys and all(isinstance(r, Explanation) for r in results)


def test_a_key_a_batch_cannot_release_is_not_released_in_its_place_and_charged(served, handle):
    before = served.state()
    released, absent = handle.explain_outliers("staff", [OUTLIERS[0], ABSENT], **FAST)
    assert isinstance(released, Explanation) and released.released and released.key == OUTLIERS[0]
    assert isinstance(absent, NotReleased) and not absent.released
    assert (absent.key, absent.charged, absent.epsilon) == (ABSENT, True, pytest.approx(0.1))
    assert absent.message and "not released" in absent.summary
    assert len(served.state()[0]) == len(before[0]) + 2  # both keys charged
    with pytest.raises(RequestFailed):
        handle.explain_outlier("staff", ABSENT, **FAST)


def test_identify_anomaly_answers_about_a_releasable_key(handle):
    answer = handle.identify_anomaly("staff", OUTLIERS[0], **ANOMALY, privacy="dp")
    assert isinstance(answer, Answer) and type(answer.anomaly) is bool
    assert (answer.key, answer.privacy, answer.epsilon) == (OUTLIERS[0], "dp", pytest.approx(0.1))
    assert {"columns", "k", "beta", "radius", "norm"} <= set(answer.as_dict())
    assert handle.identify_anomaly("tagged", TEXT_KEYS[1], **ANOMALY).key == TEXT_KEYS[1]


def test_identify_anomalies_answer_in_the_order_of_the_keys(handle):
    keys = [OUTLIERS[2], OUTLIERS[0], OUTLIERS[1]]
    assert [a.key for a in handle.identify_anomalies("staff", keys, **ANOMALY)] == keys


def test_identify_value_answers_about_a_point_present_or_absent(handle):
    for point in ({"pay": 5007.0}, {"pay": -1e6}):
        answer = handle.identify_value("staff", point, **ANOMALY)
        assert isinstance(answer, Answer) and answer.key == point and type(answer.anomaly) is bool
    with pytest.warns(DeprecationWarning, match="value= keyword"):
        assert handle.identify_value("staff", value={"pay": 1.0}, **ANOMALY).key == {"pay": 1.0}


def test_sql_runs_the_statement_as_the_call_it_spells(handle):
    [explained] = handle.sql(f"EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = {OUTLIERS[1]} USING grubbs "
                             "WITH (epsilon = 0.1)")
    assert isinstance(explained, Explanation) and explained.key == OUTLIERS[1] and explained.dataset == "staff"
    answers = handle.sql(f"IDENTIFY ANOMALY SELECT pay FROM staff WHERE id IN ({OUTLIERS[3]}, {OUTLIERS[2]}) "
                         "WITH (beta = 2, radius = 5, epsilon = 0.1)")
    assert [a.key for a in answers] == [OUTLIERS[3], OUTLIERS[2]] and all(isinstance(a, Answer) for a in answers)
    [point] = handle.sql("IDENTIFY ANOMALY VALUE (pay = 5007) FROM staff WITH (beta = 2, radius = 5, epsilon = 0.1)")
    assert point.key == {"pay": 5007.0} and isinstance(point, Answer)


@pytest.mark.parametrize("method", PRICED)
def test_cost_prices_each_request_without_charging(served, handle, method):
    target = {"explain_outlier": OUTLIERS[0], "explain_outliers": [OUTLIERS[0], OUTLIERS[1]],
              "identify_anomaly": OUTLIERS[0], "identify_anomalies": [OUTLIERS[0], OUTLIERS[1]],
              "identify_value": {"pay": 1.0}}[method]
    options = FAST if method.startswith("explain") else ANOMALY
    before = served.state()
    found = handle.cost(method, "staff", target, **options)
    assert served.state() == before
    count = len(target) if type(target) is list else 1
    assert isinstance(found, Cost)
    assert (found.notion, found.count, found.total) == ("ocdp" if method.startswith("explain") else "sp", count,
                                                        pytest.approx(0.1 * count))
    assert {"notion", "epsilon", "k", "count", "total"} <= set(found.as_dict())


@pytest.mark.parametrize(("call", "expected"), [
    (lambda a: a.explain_outlier("staff", 100_000, **FAST), Refused),  # not releasable
    (lambda a: a.identify_anomaly("staff", 100_000, **ANOMALY), Refused),
    (lambda a: a.explain_outlier("staff", OUTLIERS[0], epsilon=1e-300), Refused),  # below the minimum ε
    (lambda a: a.explain_outlier("staff", OUTLIERS[0], epsilon=0.1, seed=1), Refused),  # the owner's option
    (lambda a: a.explain_outlier("staff", "7", **FAST), UserError),  # a key of the wrong JSON type
    (lambda a: a.identify_value("staff", {"salary": 1.0}, **ANOMALY), UserError),  # not a metric
    (lambda a: a.sql("SELECT * FROM staff"), Refused),  # ordinary SQL is the owner's
    (lambda a: a.sql("EXPLAIN OUTLIER SELEC"), UserError),
    (lambda a: a.cost("coe", "staff", 1), UserError),
], ids=["key", "identify-key", "min-epsilon", "owner-option", "key-type", "metric", "sql", "bad-sql", "no-preview"])
def test_refusals_are_the_same_and_charge_nothing(served, handle, call, expected):
    before = served.state()
    with pytest.raises(expected) as caught:
        call(handle)
    assert caught.value.problem and caught.value.fix
    assert served.state() == before


def test_both_handles_return_the_same_shapes(served):
    """What the two handles return for the same calls has the same keys (a remote answer about a
    point also names it `value`) and, where no mechanism is drawn, the same values."""
    inside = in_process(served)
    with pcor_sql.connect(served.url, served.tokens["alice"], timeout=60) as remote:
        assert inside.datasets() == remote.datasets()
        assert inside.releasable_keys("staff", 5) == remote.releasable_keys("staff", 5)
        assert inside.history(limit=5) == remote.history(limit=5)
        for call in (lambda a: a.explain_outlier("staff", OUTLIERS[0], **FAST),
                     lambda a: a.identify_anomaly("staff", OUTLIERS[0], **ANOMALY),
                     lambda a: a.identify_value("staff", {"pay": 1.0}, **ANOMALY),
                     lambda a: a.cost("explain_outliers", "staff", [OUTLIERS[0]], **FAST)):
            mine, theirs = call(inside).as_dict(), call(remote).as_dict()
            assert set(mine) <= set(theirs) <= set(mine) | {"value", "dataset"}
        assert inside.cost("identify_value", "staff", {"pay": 1.0}, **ANOMALY).as_dict().items() <= \
            remote.cost("identify_value", "staff", {"pay": 1.0}, **ANOMALY).as_dict().items()
        assert {k: v for k, v in inside.me().items() if k != "max_keys"} == \
            {k: v for k, v in remote.me().items() if k != "max_keys"}


def test_an_analyst_limited_to_some_datasets_sees_only_those_on_both_handles(served):
    token = served.owner.add_analyst("erin", quota=1.0, datasets=["tagged"])
    inside = Analyst(served.owner, pipeline.analyst_policy("erin", min_epsilon=pipeline.DEFAULT_MIN_EPSILON,
                                                           max_work=pipeline.DEFAULT_MAX_WORK))
    with pcor_sql.connect(served.url, token, timeout=60) as remote:
        for handle in (inside, remote):
            assert [d["name"] for d in handle.datasets()] == ["tagged"]
            assert (handle.me()["analyst"], handle.me()["datasets"], handle.history()) == ("erin", ["tagged"], [])
