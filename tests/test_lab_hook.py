"""The lab-only methods of `Session.prepare`'s OutlierRun and `pcor_sql.planted_outliers`: the
one door the benchmarks (benchmarks/, outside the wheel) use into the engine."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import pcor_sql

Q = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture(scope="module")
def run():
    con = duckdb.connect()
    pcor_sql.load_dataset(con, "salaries")
    # Two attributes keep the lattice small (2^(|job_title| + |year| − 2) contexts).
    request = pcor_sql.outlier_request(con, Q, verifier="grubbs", by=["job_title", "year"])
    yield pcor_sql.Session(con).prepare(request)
    con.close()


def _words(run) -> list[int]:
    n = run.space(0).n_admissible
    return sorted({0, 1, n // 3, n - 1, *np.random.default_rng(0).integers(0, n, 20).tolist()})


def test_population_sql_selects_the_oracles_population(run):
    oracle, space = run.oracle(0), run.space(0)
    for w in _words(run):
        mask = space.from_free(w)
        values = run.con.arrow(run.population_sql(0, mask)).column("m")
        assert len(values) == oracle.population_size(mask)


def test_lattice_sizes_are_population_sizes_by_free_word(run):
    oracle, space = run.oracle(0), run.space(0)
    sizes = run.lattice_sizes(0)
    assert sizes.shape == (space.n_admissible,)
    for w in _words(run):
        assert sizes[w] == oracle.population_size(space.from_free(w))


def test_preload_builds_the_lazy_parts_once(run):
    run.preload()
    index = run.summary._runs
    assert index is not None and run.summary._tables
    run.preload()
    assert run.summary._runs is index  # a second call reuses what the first built


def test_planted_outliers_are_public():
    assert 42 in pcor_sql.planted_outliers("salaries")
    assert "planted_outliers" in pcor_sql.__all__
