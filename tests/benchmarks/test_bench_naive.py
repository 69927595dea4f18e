"""The naive baseline: independent verifiers agree with the engine's, its oracle with the
evaluator, its release with the engine's; a deadline stops it."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.naive import NaiveOracle, NaiveStopped, NaiveVerifier, naive_release
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.registry import default_registry
from tests.benchmarks.tiny_data import tiny_con, tiny_run

VERIFIERS = ("grubbs", "zscore", "histogram", "lof")
# histogram's default rel = 0.0025 flags nothing below N = 400 (V's own bin holds ≥ 1 value).
OPTIONS = {"histogram": {"rel": 0.05}}


@pytest.fixture(scope="module")
def con():
    connection = tiny_con()
    yield connection
    connection.close()


@pytest.mark.parametrize("name", VERIFIERS)
def test_naive_verifier_matches_engine_on_tie_free_data(name):
    # Tie-free continuous draws: DESIGN.md's LOF equals scikit-learn's there, the others are exact.
    rng = np.random.default_rng(11)
    engine = default_registry().make(name, **OPTIONS.get(name, {}))
    naive = NaiveVerifier(name, OPTIONS.get(name, {}))
    verdicts = []
    for _ in range(60):
        n = int(rng.integers(3, 300))
        x = rng.standard_t(3, size=n)
        v = float(x[rng.integers(0, n)]) if rng.random() < 0.5 else float(x.max())
        got = naive.check(x, v)
        assert got == engine.check(ArrayPopulation.of(x, v)), (name, n, v)
        verdicts.append(got)
    assert any(verdicts) and not all(verdicts)  # both outcomes exercised


def test_naive_verifier_rejects_unknown_name():
    from pcor_sql.errors import UserError

    with pytest.raises(UserError):
        NaiveVerifier("median", {})


@pytest.mark.parametrize("name", VERIFIERS)
def test_naive_oracle_equals_evaluator_on_every_context(con, name):
    run = tiny_run(con, name, verifier_options=OPTIONS.get(name))
    oracle = NaiveOracle(con, run, 0, NaiveVerifier(name, OPTIONS.get(name, {})))
    ev, space = run.oracle(0), run.space(0)
    valid = 0
    for w in range(space.n_admissible):
        mask = space.from_free(w)
        assert oracle.is_valid(mask) == ev.is_valid(mask)
        assert oracle.utility(mask) == ev.utility(mask)
        valid += oracle.is_valid(mask)
    assert valid > 0
    assert oracle.queries == space.n_admissible  # one query per context, answers remembered


def test_naive_release_is_the_engines_release(con):
    for search in ("bfs", "dfs", "random-walk", "uniform", "explore"):
        run = tiny_run(con, "grubbs", search=search, samples=10, epsilon=0.2, accounting="tight")
        engine = run.release(0, np.random.default_rng(3))
        naive = naive_release(con, run, 0, NaiveVerifier("grubbs", {}), np.random.default_rng(3))
        assert naive.mask == engine.mask, search
        assert naive.start_mask == engine.start_mask


def test_deadline_stops_the_naive_baseline(con):
    run = tiny_run(con, "lof", search="bfs", samples=10)
    with pytest.raises(NaiveStopped):
        naive_release(con, run, 0, NaiveVerifier("lof", {}), np.random.default_rng(0),
                      deadline=time.perf_counter() - 1.0)
