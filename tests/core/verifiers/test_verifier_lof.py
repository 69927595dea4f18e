"""LOF under both rules for duplicates: equal to scikit-learn on tie-free data, equal to a plain
O(N²) reading of DESIGN.md §2 on duplicate-heavy data, through every path of the windowed
computation. (Rule-specific cases: test_verifier_lof_duplicates.py.)"""

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.core.verifiers.capabilities import Reads, capabilities_of
from pcor_sql.core.verifiers import lof as lof_module
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.lof import Lof, local_outlier_factor
from pcor_sql.errors import UserError
from tests.core.verifiers.lof_reference import (
    RTOL,
    RULES,
    Spy,
    StingySpy,
    assert_same,
    brute_lof,
    brute_lof_all,
    duplicate_heavy,
)


@pytest.mark.parametrize("rule", RULES)
def test_equals_scikit_learn_on_tie_free_data(rule):
    # Without ties the two rules are one definition, and scikit-learn's.
    sklearn_neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(7)
    sizes = [2, 3, 4, 5, 8, 15, 21, 22, 31, 40, 80, 150, 400]
    for case in range(50):
        n = sizes[case % len(sizes)]
        k = int(rng.integers(1, 31))
        x = rng.standard_t(3, size=n) * 10 ** rng.uniform(-2, 3)
        assert np.unique(x).size == n
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn warns when k ≥ N and uses N − 1
            model = sklearn_neighbors.LocalOutlierFactor(n_neighbors=k).fit(x[:, None])
        want = -model.negative_outlier_factor_
        # scikit-learn adds 1e-10 to every mean reach-distance; the distinct rule does not. Each
        # mean is ≥ the smallest k-distance r, so each lrd moves by ≤ 1e-10/r relatively and
        # LOF, a ratio of lrds, by ≤ 2e-10/r: that much on top of the reordering tolerance.
        d = np.abs(x[:, None] - x[None, :]) + np.diag(np.full(n, np.inf))
        r = float(np.partition(d, min(k, n - 1) - 1, axis=1)[:, min(k, n - 1) - 1].min())
        rtol = RTOL + (2e-10 / r if rule == "distinct" else 0.0)
        for iv in {0, n - 1, int(np.argmax(x)), int(np.argmin(x)), int(rng.integers(n))}:
            got = local_outlier_factor(Spy(x, x[iv]), k, rule)
            assert math.isclose(got, want[iv], rel_tol=rtol), (got, want[iv], n, k, iv)


@pytest.mark.parametrize("rule", RULES)
def test_equals_brute_force_on_duplicate_heavy_data(rule):
    rng = np.random.default_rng(13)
    for case in range(400):
        n = int(rng.integers(2, 120))
        k = int(rng.integers(1, 31))
        x = duplicate_heavy(rng, case % 5, n)
        if rule == "distinct" and np.unique(x).size < 2:
            continue  # undefined: test_verifier_lof_duplicates.py
        want = brute_lof_all(x, k, rule)
        for iv in {0, int(np.argmax(x)), int(np.argmin(x)), int(rng.integers(n))}:
            got = local_outlier_factor(Spy(x, x[iv]), k, rule)
            assert_same(got, want[iv], (case, n, k, x[iv]))


@pytest.mark.parametrize("rule", RULES)
def test_window_path_on_large_populations(rule):
    """N ≫ window: the windowed result must still equal the global brute force."""
    rng = np.random.default_rng(17)
    small_windows = checks = 0
    for case in range(6):
        n = 2000
        k = [1, 5, 20, 30, 20, 12][case]
        x = rng.normal(size=n) if case % 3 == 0 else duplicate_heavy(rng, case % 5, n)
        want = brute_lof_all(x, k, rule)
        distinct = np.unique(x).size
        for iv in rng.integers(n, size=15):
            pop = Spy(x, x[iv])
            assert_same(local_outlier_factor(pop, k, rule), want[iv], (case, k, x[iv]))
            # Which checks must be cheap: plain — unless V has > k' copies (LOF = 1 from a
            # count); distinct — when the population has many more distinct values than the
            # window needs (else the window is most of the population by definition).
            if (np.count_nonzero(x == x[iv]) <= k) if rule == "plain" else distinct > n // 2:
                small_windows += max(pop.windows) < n // 6  # k = 30: 2·(2H + k') ≈ 190–230 rows
                checks += 1
    assert checks >= 30 and small_windows > checks * 0.7  # mostly answered from small windows


@pytest.mark.parametrize("rule", RULES)
def test_window_growing_path_sparse_neighbourhoods_and_extremes(rule):
    rng = np.random.default_rng(19)
    grew = 0
    for case in range(10):
        dense = rng.normal(size=800)
        far = rng.uniform(8, 60, size=int(rng.integers(1, 25))) * rng.choice([-1, 1])
        x = np.concatenate((dense, far, np.round(far[:3], 0)))
        k = int(rng.choice([3, 10, 20]))
        want = brute_lof_all(x, k, rule)
        for iv in {int(np.argmin(x)), int(np.argmax(x)), 800, x.size - 1, int(rng.integers(800))}:
            assert_same(local_outlier_factor(Spy(x, x[iv]), k, rule), want[iv], (case, k, x[iv]))
            pop = StingySpy(x, x[iv])
            assert_same(local_outlier_factor(pop, k, rule), want[iv], (case, k, x[iv]))
            grew += len(pop.windows) > 1
    assert grew > 20  # the first window was too small and was grown, yet the result is exact


@pytest.mark.parametrize("rule", RULES)
def test_band_widening_when_rounding_ties_many_values(rule, monkeypatch):
    # Distances from 1e16 to values in [0, 1) all round to the same double, so N_k(V) holds
    # every one of them: far more distinct values than the first band (k'+1 per side).
    rng = np.random.default_rng(23)
    small = np.unique(rng.uniform(0, 1, size=60))
    x = np.concatenate((small, [1e16, 1e16 + 2.0]))
    widened = []
    name = "plain_window_lof" if rule == "plain" else "distinct_window_lof"
    real = getattr(lof_module, name)

    def spying(*args):
        out = real(*args)
        widened.append(isinstance(out, lof_module.Widen))
        return out

    monkeypatch.setattr(lof_module, name, spying)
    for k in (1, 2, 5):
        for iv in (x.size - 2, x.size - 1, 0, 30):
            assert_same(local_outlier_factor(Spy(x, x[iv]), k, rule), brute_lof(x, iv, k, rule), (k, iv))
    assert any(widened)


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-30, 30), min_size=1, max_size=90),
    st.integers(0, 2),
    st.integers(1, 25),
    st.data(),
)
def test_property_grid_values_equal_brute_force(rule, ints, decimals, k, data):
    x = np.asarray(ints, dtype=float) / 10**decimals
    iv = data.draw(st.integers(0, x.size - 1))
    got = local_outlier_factor(Spy(x, x[iv]), k, rule)
    if x.size < 2 or (rule == "distinct" and np.unique(x).size < 2):
        assert math.isnan(got)
    else:
        assert_same(got, brute_lof(x, iv, k, rule), (list(x), iv, k))


# Plain-rule LOF(V) for `golden_cases()`, recorded before `_window_lof` was split into helpers
# (repr round-trips a double). They are compared within the reference's RTOL, not bit for bit:
# the same band arithmetic summed in another order (numpy's SIMD width differs between CPUs)
# moves a value by an ulp or two, and lof_reference.py says why 1e-9 bounds any reordering.
GOLDEN_LOF = [
    1.7608634746672847, 3.458108354994522, 1.0, 1.0, 1.0, 1.0, 16.40033563024811, 1.0, 1.0,
    2.05835402778376, 1.5473052755289745, 1.0217749185774738, 1.0177371154555637, 1.0, 1.0,
    0.9479937884740707, 0.9999427598425321, 1.0045137335701066, 4.1774249130947165,
    3.1382569484638188, 0.9862815228655462, 0.9855742591364027, 1.0000000000000002,
    1.0000000000000002, 30.00144930007488, 42.007065125770765, 42.160861831000275,
    1.090859021707115, 1.031963401163792, 8.528782118067228e+17, 8.528782118067228e+17,
    32.29505199092552, 1.4301468933746835, 1.4301468933746835, 1.1494660596843567,
    0.8779892611449404, 0.9767915050503034, 0.9767915050503034, 39.10664212559586,
    1.5892843309164895, 1.4432826414464819, 1.049368703656175, 2.3996883378040397,
    12.675517170029918, 14.61222640255188,
]


def golden_cases():
    """Fixed datasets that take every path of the kernel (`lof_band`): interior and padded bands, V with
    more than k' copies, growing windows (infinite and finite hints) and a widened band."""
    rng = np.random.default_rng(31337)
    mixed = np.sort(np.concatenate((
        rng.normal(size=600),  # tie-free, dense
        np.round(rng.normal(5.0, 1.0, 300), 1),  # many ties, some values with > k' copies
        rng.uniform(20.0, 80.0, 12),  # a sparse tail
    )))
    widen = np.sort(np.concatenate((np.unique(rng.uniform(0, 1, size=60)), [1e16, 1e16 + 2.0])))
    far = rng.uniform(8.0, 60.0, size=15)
    sparse = np.sort(np.concatenate((rng.normal(size=800), far, np.round(far[:3], 0), -far[3:6])))
    for k in (1, 5, 20):
        for i in (0, 1, 150, 333, 700, 750, 905, mixed.size - 2, mixed.size - 1):
            yield mixed, mixed[i], k
    for i in (0, 30, widen.size - 2, widen.size - 1):
        yield widen, widen[i], 2
    for k in (3, 20):
        for i in (0, 3, 5, 500, 800, sparse.size - 4, sparse.size - 1):
            yield sparse, sparse[i], k


def test_plain_rule_matches_recorded_values_within_rounding():
    got = [local_outlier_factor(ArrayPopulation(x, float(v)), k, "plain") for x, v, k in golden_cases()]
    assert len(got) == len(GOLDEN_LOF)
    for i, (g, w) in enumerate(zip(got, GOLDEN_LOF)):
        assert_same(g, w, i)


def test_every_window_path_equals_brute_force_under_both_rules():
    # The golden cases take every path of the kernel; the distinct rule has no recorded values,
    # so both rules are held to the O(N²) reference instead.
    for i, (x, v, k) in enumerate(golden_cases()):
        iv = int(np.searchsorted(x, v))
        for rule in RULES:
            assert_same(local_outlier_factor(ArrayPopulation(x, float(v)), k, rule), brute_lof(x, iv, k, rule), (i, rule))


def test_tiny_and_constant_populations():
    for rule in RULES:
        assert not Lof(duplicates=rule).check(Spy([4.0], 4.0))
        assert math.isnan(Lof(duplicates=rule).score(Spy([4.0], 4.0)))
        # two points: each is the other's neighbour
        assert Lof(k=1, duplicates=rule).score(Spy([0.0, 9.0], 9.0)) == 1.0
        assert not Lof(k=1, duplicates=rule).check(Spy([0.0, 9.0], 9.0))
        assert not Lof(duplicates=rule).check(Spy([0.0, 0.0, 5.0], 5.0))
    for n in (2, 3, 21, 500):
        pop = Spy(np.full(n, 2.5), 2.5)
        # plain: every lrd is 1/1e-10, so LOF = 1 exactly; distinct: no other distinct value,
        # LOF undefined. Neither is an outlier.
        assert Lof(k=20, duplicates="plain").score(pop) == 1.0
        assert math.isnan(Lof(k=20).score(pop))
        for rule in RULES:
            assert not Lof(k=20, threshold=1.0, duplicates=rule).check(pop)


def test_verdict_uses_the_threshold():
    rng = np.random.default_rng(29)
    x = np.concatenate((rng.normal(size=300), [9.0]))
    score = Lof(k=10).score(Spy(x, 9.0))
    assert score > 3
    assert Lof(k=10, threshold=score - 1e-6).check(Spy(x, 9.0))
    assert not Lof(k=10, threshold=score).check(Spy(x, 9.0))


def test_value_missing_from_its_population_is_an_internal_error():
    from pcor_sql.errors import InternalError

    with pytest.raises(InternalError):
        local_outlier_factor(ArrayPopulation(np.array([0.0, 1.0, 2.0]), 1.5), 1)


@pytest.mark.parametrize(
    "options, bad",
    [({"k": 0}, "k="), ({"k": 2.0}, "k="), ({"k": True}, "k="), ({"threshold": 0.9}, "threshold="),
     ({"threshold": float("inf")}, "threshold="), ({"threshold": "1.5"}, "threshold="),
     ({"duplicates": "ties"}, "duplicates="), ({"duplicates": 1}, "duplicates="), ({"duplicates": None}, "duplicates=")],
)
def test_bad_options_are_user_errors(options, bad):
    with pytest.raises(UserError, match=bad):
        Lof(**options)


def test_options_round_trip():
    lof = Lof(k=7, threshold=2)
    # The default rule is not shown: `lof(k=7, threshold=2.0)` means the distinct rule.
    assert lof.options() == {"k": 7, "threshold": 2.0} and lof.duplicates == "distinct"
    assert Lof(**lof.options()) == lof
    assert lof.name == "lof" and capabilities_of(lof).reads is Reads.NEAR
    plain = Lof(k=7, threshold=2, duplicates="Plain")  # any ASCII case, as every fixed-value option
    assert plain.options() == {"k": 7, "threshold": 2.0, "duplicates": "plain"}
    assert Lof(**plain.options()) == plain and plain != lof
    with pytest.raises(UserError, match="duplicates"):  # nothing else folded (DESIGN.md §6)
        Lof(k=7, duplicates=" plain ")


def test_scikit_learn_parts_from_the_plain_rule_on_ties():
    """The plain rule keeps every tie at a k-distance in N_k; scikit-learn takes exactly k
    neighbours. On tied data they disagree, so the docs do not call `plain` scikit-learn's."""
    sklearn_neighbors = pytest.importorskip("sklearn.neighbors")
    x = np.array([0.0, 1, 1, 1, 2, 2, 2, 3, 10])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate values are leading to incorrect results"
        theirs = -sklearn_neighbors.LocalOutlierFactor(n_neighbors=2).fit(x[:, None]).negative_outlier_factor_[-1]
    ours = local_outlier_factor(ArrayPopulation(x, 10.0), 2, "plain")
    assert abs(ours - theirs) > 0.1 * theirs, (ours, theirs)
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for text in (lof_module.__doc__, Lof.__doc__, *(page.read_text(encoding="utf-8") for page in pages)):
        assert not re.search(r"plain.{0,40}\(?is scikit-learn's|\(scikit-learn's\)|: scikit-learn's rule", text), text
