"""All four built-ins on tiny populations (N = 1, 2, 3) and on constant metrics."""

import numpy as np
import pytest

from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.registry import default_registry

LENIENT = {  # options that flag as much as each verifier allows
    "grubbs": {"alpha": 0.999},
    "histogram": {"rel": 1.0},
    "lof": {"k": 1, "threshold": 1.0},
    "zscore": {"z": 1e-9},
}


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_one_row_is_never_an_outlier(name):
    reg = default_registry()
    for options in ({}, LENIENT[name]):
        assert reg.make(name, **options).check(ArrayPopulation.of([42.0], 42.0)) is False


@pytest.mark.parametrize("name", sorted(LENIENT))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 25, 1000])
def test_a_constant_metric_is_never_an_outlier(name, n):
    reg = default_registry()
    for value in (0.0, -3.25, 1e12):
        pop = ArrayPopulation.of(np.full(n, value), value)
        for options in ({}, LENIENT[name]):
            assert reg.make(name, **options).check(pop) is False


def test_two_rows():
    reg = default_registry()
    pop = ArrayPopulation.of([0.0, 1.0], 1.0)
    assert not reg.make("grubbs", alpha=0.999).check(pop)  # Grubbs needs N ≥ 3
    assert reg.make("zscore", z=0.7).check(pop)  # |1 − 0.5| / 0.7071 = 0.7071
    assert not reg.make("zscore", z=0.71).check(pop)
    assert reg.make("histogram", rel=1.0).check(pop)  # two bins of one: 1 < 1·2
    assert not reg.make("histogram", rel=0.5).check(pop)  # 1 < 0.5·2 is false
    assert reg.make("lof", k=1).score(pop) == 1.0  # each is the other's only neighbour
    assert not reg.make("lof", k=1, threshold=1.0).check(pop)


def test_three_rows():
    reg = default_registry()
    pop = ArrayPopulation.of([0.0, 0.0, 1.0], 1.0)
    # G = (2/3)/√(1/3) = 2/√3 = (N−1)/√N, the largest G three values allow; G_crit(0.05, 3) = 1.1543.
    assert reg.make("grubbs").check(pop)
    assert not reg.make("grubbs").check(ArrayPopulation.of([0.0, 0.0, 1.0], 0.0))
    assert not reg.make("grubbs").check(ArrayPopulation.of([0.0, 0.5, 1.0], 1.0))
    assert reg.make("zscore", z=1.1).check(pop) and not reg.make("zscore").check(pop)
    assert reg.make("histogram", rel=0.5).check(pop)  # bins [0, .5) [.5, 1]: 1 < 1.5
    # LOF, k = 1, plain rule: V = 1 has kdist 1 and lrd 1/(1+1e-10); its neighbour 0 has a
    # copy at distance 0 (lrd 1e10), so LOF(V) ≈ 1e10 — the artefact of duplicates.
    plain = {"k": 1, "duplicates": "plain"}
    assert reg.make("lof", **plain).score(pop) == pytest.approx(1e10, rel=1e-6)
    assert reg.make("lof", **plain).check(pop)
    assert not reg.make("lof", k=2, duplicates="plain").check(pop)  # k' = 2: everyone's neighbourhood is everyone
    # Distinct rule: k' = min(1, 2 − 1) = 1; every k-distance is 1 (0 ↔ 1), every reach is 1,
    # every lrd is 1, so LOF(V) = 1 exactly (sums of ones and one division by a whole number).
    assert reg.make("lof", k=1).score(pop) == 1.0
    assert not reg.make("lof", k=1, threshold=1.0).check(pop)
