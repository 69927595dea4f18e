"""Requests are values validated once, at construction."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcor_sql.core.accounting import ACCOUNTINGS, SEARCHES, derive_budget
from pcor_sql.errors import UserError
from pcor_sql.request_values import (
    AnomalyRequest,
    OutlierRequest,
    VerifierSpec,
    request_options,
)
from pcor_sql.request_specs import Job, statement_specs

BASE = dict(relation="salaries", metric="salary", selector="id = 42")


def test_defaults_are_the_documented_ones():
    r = OutlierRequest(**BASE)
    assert (r.search, r.samples, r.descents, r.epsilon, r.accounting, r.utility) == ("bfs", 50, 24, 0.2, "tight", "population")
    assert r.verifier == VerifierSpec("lof") and r.select_list == "salary" and r.seed is None
    assert r.budget == derive_budget(0.2, "bfs", 50, "tight")


def test_a_request_is_frozen_and_hashable():
    r = OutlierRequest(**BASE, by=["job_title", "year"], domains={"year": ["2019"]}, start={"year": ["2019"]})
    assert r.by == ("job_title", "year") and r.domains == (("year", ("2019",)),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.epsilon = 1.0
    assert hash(r) == hash(OutlierRequest(**BASE, by=("job_title", "year"), domains={"year": ("2019",)},
                                          start={"year": ["2019"]}))


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": True}, "epsilon"),
        ({"search": "astar"}, "unknown search"),
        ({"samples": 0}, "samples"),
        ({"descents": -1}, "descents"),
        ({"accounting": "loose"}, "accounting"),
        ({"utility": "size"}, "utility"),
        ({"by": 'job_title,"year"'}, "quotes a name"),
        ({"by": "job_title,,year"}, "by entry"),
        ({"by": 7}, "list of names"),
        ({"by": ["a", "a"]}, "twice"),
        ({"start": {"year": "2019"}}, "list of values"),
        ({"verifier": 42}, "verifier"),
        ({"verifier": "lof(k=5)"}, "options in its text"),
        ({"seed": -1}, "seed"),
        ({"max_contexts": 0}, "max_contexts"),
        ({"max_checks": 0}, "max_checks"),
        ({"max_checks": 2.5}, "max_checks"),
        ({"owner_view": "yes"}, "owner_view"),
        ({"selector": " "}, "selector"),
        ({"dataset": ""}, "dataset"),
    ],
)
def test_bad_options_are_refused_at_construction(changes, needle):
    with pytest.raises(UserError, match=needle):
        OutlierRequest(**{**BASE, **changes})


def test_by_as_text_is_a_list_of_names_not_of_characters():
    assert OutlierRequest(**BASE, by="region, product").by == ("region", "product")
    assert OutlierRequest(**BASE, by="region").by == ("region",)
    assert OutlierRequest(**BASE).replace(by="a,b").by == ("a", "b")


def test_samples_default_to_the_searchs_own_n():
    assert OutlierRequest(**BASE, search="explore").samples == 10_000
    assert OutlierRequest(**BASE, search="explore").max_checks == 4_000
    assert OutlierRequest(**BASE, search="dfs").samples == 50
    # n left to the search follows the search; an n the caller gave stays
    assert OutlierRequest(**BASE).replace(search="explore").samples == 10_000
    assert OutlierRequest(**BASE, search="explore").replace(search="bfs").samples == 50
    assert OutlierRequest(**BASE, samples=7).replace(search="explore").samples == 7
    assert OutlierRequest(**BASE, search="explore", samples=300).replace(epsilon=1.0).samples == 300


def test_explore_spends_the_whole_epsilon_on_one_em():
    tight = OutlierRequest(**BASE, search="explore", epsilon=0.2).budget
    paper = OutlierRequest(**BASE, search="explore", epsilon=0.2, accounting="paper").budget
    assert (tight.max_em_calls, tight.epsilon1) == (1, 0.2)
    assert (paper.max_em_calls, paper.epsilon1) == (1, 0.1)
    assert OutlierRequest(**BASE, search="explore", max_checks=5).search_options() == {"samples": 10_000, "max_checks": 5}


def test_descents_apply_to_bfs_only():
    assert OutlierRequest(**BASE, search="dfs", descents=24).descents == 0
    assert OutlierRequest(**BASE, search="bfs", descents=3).descents == 3
    assert OutlierRequest(**BASE).replace(search="uniform").descents == 0


@given(
    search=st.sampled_from(SEARCHES),
    accounting=st.sampled_from(ACCOUNTINGS),
    epsilon=st.floats(min_value=1e-6, max_value=100, allow_nan=False),
    samples=st.integers(min_value=1, max_value=10_000),
)
def test_the_budget_spends_exactly_epsilon_in_the_worst_case(search, accounting, epsilon, samples):
    b = OutlierRequest(**BASE, search=search, accounting=accounting, epsilon=epsilon, samples=samples).budget
    assert b.epsilon == epsilon
    assert math.isclose(b.cost_per_call * b.max_em_calls, epsilon, rel_tol=1e-12)


def test_anomaly_requests_validate_their_parameters():
    r = AnomalyRequest(relation="homicides", columns=["victim_age"], beta=5, radius=1, epsilon=0.5)
    assert (r.columns, r.privacy, r.k, r.norm, r.selector) == (("victim_age",), "sp", 1, "l2", None)
    for bad, needle in [({"beta": 0}, "beta"), ({"k": 9}, "k must be"), ({"norm": "l3"}, "norm"),
                        ({"epsilon": None}, "epsilon"), ({"columns": []}, "column"), ({"privacy": "x"}, "privacy")]:
        with pytest.raises(UserError, match=needle):
            AnomalyRequest(**{"relation": "h", "columns": ["a"], "beta": 5, "radius": 1, "epsilon": 0.5, **bad})


def test_options_are_described_once_in_their_specs():
    for cls in (OutlierRequest, AnomalyRequest):
        for name, spec in request_options(cls).items():
            assert spec.name == name and spec.help and spec.example, name
    assert {spec.name for spec in statement_specs(Job.EXPLAIN)} == {
        "start", "utility", "search", "samples", "descents", "max_checks", "max_draws", "epsilon", "accounting", "seed",
        "dataset", "owner_view",
    }
    # A request field and its spec agree on the default.
    for f in dataclasses.fields(OutlierRequest):
        if "spec" in f.metadata and f.name != "verifier":
            assert f.default == f.metadata["spec"].default, f.name


def test_a_search_option_is_read_through_the_request_with_its_searchs_default():
    r = OutlierRequest(**BASE, search="uniform", max_draws=7)
    assert r.max_draws == 7 and r.search_options() == {"samples": 50, "max_draws": 7}
    assert OutlierRequest(**BASE).max_draws == 0  # bfs does not read it
    assert r.replace(search="bfs").descents == 24 and r.replace(max_draws=9).max_draws == 9
    with pytest.raises(UserError, match="max_draws must be ≥ 1"):
        OutlierRequest(**BASE, search="uniform", max_draws=0)
