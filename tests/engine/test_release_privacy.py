"""Privacy and correctness of the release machinery on a tiny ENUM dataset (tests/engine/small_data.py).

- The COE of the dataset is known: enumerated by the fast path and by the plain SQL path.
- Exact law: `direct`'s output frequencies follow exp(ε1·u)/Σ (chi-square, with a negative control).
- Every released context of every search is admissible and valid, re-verified through DuckDB.
- Privacy audit: on D and a neighbour D' (one row removed, same COE) every output's empirical
  probability ratio is consistent with e^ε, and a deliberately broken mechanism is caught.

Every statistical test is seeded (one seed per release, as a user's `seed=` would be), so it is
deterministic; the stated bounds say how unlikely a false failure would be over random seeds.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pcor_sql.core.accounting import derive_budget
from pcor_sql.core.mechanism import em_probabilities
from pcor_sql.core.randomness import make_source
from pcor_sql.core.search_specs import run_search
from pcor_sql.core.start import find_start
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.zscore import ZScore
from pcor_sql.engine.evaluator import plain_population_sql
from pcor_sql.engine.record_search import release_one, released_predicate
from pcor_sql.errors import UserError
from tests.engine.small_data import BASE_ROWS, NEIGHBOUR_DROP_ID, MomentZ, SmallCase, small_case

SEARCHES = ("direct", "uniform", "random-walk", "dfs", "bfs", "explore")
VERIFIER = MomentZ(2.0)
BIG = 1 << 20  # max_admissible for the 32-context lattice: never the limiting factor here
P_MIN = 1e-3  # chi-square acceptance level


@pytest.fixture(scope="module")
def d() -> SmallCase:
    case = small_case()
    yield case
    case.close()


@pytest.fixture(scope="module")
def d_minus() -> SmallCase:
    case = small_case(drop_ids=[NEIGHBOUR_DROP_ID])
    yield case
    case.close()


class FrozenCOE:
    """An evaluator whose `coe` is computed once: it is deterministic, and recomputing it per
    run would only slow the 20,000-run tests. Validity and utility go to the evaluator."""

    def __init__(self, ev):
        self.ev = ev
        self.space = ev.space
        self._coe = None

    def is_valid(self, mask: int) -> bool:
        return self.ev.is_valid(mask)

    def utility(self, mask: int) -> float:
        return self.ev.utility(mask)

    def coe(self, max_admissible: int, progress=None):
        if self._coe is None:
            self._coe = self.ev.coe(max_admissible, progress)
        return self._coe


def plain_coe(case: SmallCase, verifier: Any) -> dict[int, float]:
    """COE by brute force: every admissible context's WHERE run in DuckDB (plain path)."""
    ev = case.evaluator(verifier, plain=True)
    out = {}
    for w in range(case.space.n_admissible):
        mask = case.space.from_free(w)
        if ev.is_valid(mask):
            out[mask] = ev.utility(mask)
    return out


def fast_coe(case: SmallCase, verifier: Any) -> dict[int, float]:
    masks, utils = case.evaluator(verifier).coe(BIG)
    return {int(m): float(u) for m, u in zip(masks, utils)}


def selects(case: SmallCase, mask: int, attr: str, value: str) -> bool:
    return value in case.space.values(mask)[attr]


# -- the known COE ---------------------------------------------------------------------


def test_coe_is_known_and_equal_on_the_neighbour(d, d_minus):
    coe_d, coe_dm = fast_coe(d, VERIFIER), fast_coe(d_minus, VERIFIER)
    assert coe_d == plain_coe(d, VERIFIER)
    assert coe_dm == plain_coe(d_minus, VERIFIER)
    assert len(coe_d) == 20 and d.space.n_admissible == 32
    assert d.space.v_mask not in coe_d  # V's own cell is not a valid start
    assert set(coe_d) == set(coe_dm)  # same COE: the audit's precondition
    for mask in coe_d:
        # population utility is monotone with sensitivity 1: the removed row (d2, r1) counts
        # exactly in the contexts that select both d2 and r1
        in_context = selects(d, mask, "dept", "d2") and selects(d, mask, "role", "r1")
        assert coe_d[mask] - coe_dm[mask] == (1.0 if in_context else 0.0)


# -- exact law of direct ---------------------------------------------------------------


def merged_chisquare(observed: np.ndarray, expected: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square p-value after merging the smallest expected cells until each is ≥ min_expected."""
    order = np.argsort(expected)
    obs, exp = list(observed[order].astype(float)), list(expected[order].astype(float))
    while len(exp) > 1 and exp[0] < min_expected:
        o, e = obs.pop(0), exp.pop(0)
        obs[0] += o
        exp[0] += e
        # keep the merged list sorted by expectation
        k = int(np.searchsorted(exp[1:], exp[0]))
        obs.insert(k, obs.pop(0))
        exp.insert(k, exp.pop(0))
    return float(stats.chisquare(obs, exp).pvalue)


def test_merged_chisquare_merges_tiny_cells():
    p = merged_chisquare(np.array([0, 1, 50, 49]), np.array([0.5, 0.5, 50.0, 49.0]))
    assert p > 0.9
    assert merged_chisquare(np.array([90, 10]), np.array([50.0, 50.0])) < 1e-6


@pytest.mark.slow
def test_direct_output_law_is_exactly_the_exponential_mechanism(d):
    runs = 20_000
    eps1 = derive_budget(0.2, "direct", 50, "tight").epsilon1
    assert eps1 == 0.2
    oracle = FrozenCOE(d.evaluator(VERIFIER))
    masks, utils = oracle.coe(BIG)
    # not degenerate: ε1 × (utility range 6..15) spreads the law over every valid context
    law = em_probabilities(utils, eps1)
    assert law.max() < 0.2 and law.min() * runs > 100
    counts = Counter(run_search("direct", oracle, eps1, make_source(seed)[0], start=None).mask for seed in range(runs))
    assert set(counts) <= {int(m) for m in masks}
    observed = np.array([counts[int(m)] for m in masks], dtype=float)
    assert observed.sum() == runs
    assert merged_chisquare(observed, law * runs) >= P_MIN
    # negative control: the same draws reject a law with a 1.5× larger ε1 and the uniform law
    assert merged_chisquare(observed, em_probabilities(utils, 1.5 * eps1) * runs) < P_MIN
    assert merged_chisquare(observed, np.full(len(masks), runs / len(masks))) < P_MIN


@pytest.mark.slow
def test_explore_output_law_is_directs_when_it_sees_every_valid_context(d):
    # 32 admissible contexts, 20 valid: explore's own defaults (n = 10,000, 2,000 checks)
    # cover the lattice, so it collects all of COE and its law is direct's, exactly.
    runs = 10_000
    budget = derive_budget(0.2, "explore", 10_000, "tight")
    assert (budget.epsilon1, budget.max_em_calls) == (0.2, 1)
    oracle = FrozenCOE(d.evaluator(VERIFIER))
    masks, utils = oracle.coe(BIG)
    law = em_probabilities(utils, budget.epsilon1)
    counts = Counter()
    for seed in range(runs):
        res = run_search("explore", oracle, budget.epsilon1, make_source(seed)[0], start=None)
        assert sorted(res.trace.visited) == sorted(int(m) for m in masks)
        counts[res.mask] += 1
    observed = np.array([counts[int(m)] for m in masks], dtype=float)
    assert observed.sum() == runs
    assert merged_chisquare(observed, law * runs) >= P_MIN
    assert merged_chisquare(observed, em_probabilities(utils, 1.5 * budget.epsilon1) * runs) < P_MIN


# -- every release is valid ------------------------------------------------------------


def independent_z_check(case: SmallCase, mask: int, z: float) -> bool:
    """MomentZ's rule recomputed with numpy from the rows the *released* predicate selects."""
    pred = released_predicate(case.summary, case.space, mask)
    rows = case.con.execute(f"SELECT id, salary FROM emp WHERE {pred}").fetchall()
    assert 1 in {r[0] for r in rows}, "the released context does not contain V"
    vals = np.array([r[1] for r in rows], dtype=float)
    if vals.size < 3 or vals.std(ddof=1) == 0:
        return False
    return abs(case.v - vals.mean()) / vals.std(ddof=1) > z


def _release(d, verifier, source, *, start=None, epsilon=1.0, **options):
    """One record's release with a request holding `options` (search, samples, utility, ...)."""
    from pcor_sql.engine.record_search import SelectedRecord
    from pcor_sql.request_values import OutlierRequest

    request = OutlierRequest("emp", "pay", "id = 0", epsilon=epsilon, **options)
    return release_one(d.con, d.summary, SelectedRecord(d.row, d.v), verifier, request, source, start)



@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("utility", ["population", "overlap"])
def test_every_released_context_is_admissible_and_valid(d, search, utility):
    budget = derive_budget(1.0, search, 5, "tight")
    plain = d.evaluator(VERIFIER, plain=True)
    released = Counter()
    for seed in range(120):
        rel = _release(d, VERIFIER, make_source(seed)[0], search=search, samples=5, utility=utility)
        assert rel.trace.n_em_calls <= budget.max_em_calls
        released[rel.mask] += 1
    assert len(released) > 1  # the releases are random, not a constant
    for mask in released:
        assert d.space.is_admissible(mask)
        assert plain.is_valid(mask)
        assert independent_z_check(d, mask, VERIFIER.z)


@pytest.mark.parametrize("verifier", [ZScore(3.0), Grubbs(0.05)], ids=["zscore3", "grubbs"])
@pytest.mark.parametrize("search", SEARCHES)
def test_built_in_verifiers_release_only_valid_contexts(d, verifier, search):
    budget = derive_budget(1.0, search, 4, "tight")
    plain = d.evaluator(verifier, plain=True)
    coe = set(plain_coe(d, verifier))
    assert coe, "the dataset must have valid contexts for this verifier"
    for seed in range(40):
        rel = _release(d, verifier, make_source(seed)[0], search=search, samples=4, owner_view=True)
        assert d.space.is_admissible(rel.mask) and rel.mask in coe and plain.is_valid(rel.mask)
        assert rel.owner is not None and rel.owner.em_calls == rel.trace.n_em_calls


def test_overlap_utility_coe_agrees_with_the_plain_path(d):
    start, _ = find_start(d.evaluator(VERIFIER))
    fast = d.evaluator(VERIFIER, utility="overlap", start=start)
    plain = d.evaluator(VERIFIER, utility="overlap", start=start, plain=True)
    masks, utils = fast.coe(BIG)
    pm, pu = plain.coe(BIG)
    assert [int(m) for m in masks] == [int(m) for m in pm]
    assert list(utils) == list(pu)
    for m, u in zip(masks, utils):
        assert u == plain.population_size(int(m) & start)


def test_released_predicate_selects_exactly_the_verified_population():
    # Rows with a NULL attribute are in no population (DESIGN.md §2). The released predicate,
    # and the explanation query built from it, must select the same rows the verifier judged:
    # here a NULL-dept row earning 500 would hide V in every context that selects all depts.
    rows = (*BASE_ROWS, (16, None, "r0", 500.0), (17, "d1", None, 9.0))
    case = small_case(rows=rows)
    try:
        ev = case.evaluator(VERIFIER)
        masks, _ = ev.coe(BIG)
        assert len(masks) > 0
        for w in range(case.space.n_admissible):
            mask = case.space.from_free(w)
            pred = released_predicate(case.summary, case.space, mask)
            n = case.con.execute(f"SELECT count(*) FROM emp WHERE {pred}").fetchall()[0][0]
            assert n == ev.population_size(mask), f"released predicate {pred!r} selects {n} rows, the population has {ev.population_size(mask)}"
        for m in masks:
            assert independent_z_check(case, int(m), VERIFIER.z)
    finally:
        case.close()


def test_plain_population_sql_selects_the_population(d):
    # the plain path's SQL is the population form: V is in it, its size is the utility
    ev = d.evaluator(VERIFIER)
    for w in range(d.space.n_admissible):
        mask = d.space.from_free(w)
        sql = plain_population_sql(d.summary, d.space, mask)
        n = len(d.con.execute(sql).fetchall())
        assert n == ev.population_size(mask) >= 1


def test_direct_refuses_a_lattice_above_the_size_guard_unless_forced(d):
    budget = derive_budget(1.0, "direct", 5, "tight")
    with pytest.raises(UserError):
        _release(d, VERIFIER, make_source(0)[0], search="direct", max_contexts=16)
    rel = _release(d, VERIFIER, make_source(0)[0], search="direct", max_contexts=None)
    assert rel.mask in fast_coe(d, VERIFIER)


def test_user_start_must_be_valid(d):
    budget = derive_budget(1.0, "bfs", 5, "tight")
    kwargs = dict(search="bfs", samples=5)
    src = make_source(0)[0]
    with pytest.raises(UserError):  # V's own cell: admissible but not valid
        _release(d, VERIFIER, src, start={"dept": ["d0"], "role": ["r0"]}, **kwargs)
    with pytest.raises(UserError):  # does not contain V
        _release(d, VERIFIER, src, start={"dept": ["d1"]}, **kwargs)
    rel = _release(d, VERIFIER, src, start={"dept": ["d0", "d1"]}, **kwargs)
    assert rel.start_source == "user" and rel.start_mask == d.space.from_values({"dept": ["d0", "d1"]})


# -- privacy audit ---------------------------------------------------------------------

AUDIT_ALPHA = 1e-3  # family-wise probability that any confidence interval below misses
MIN_COUNT = 200  # outputs compared: seen at least this often on both datasets
EPS1 = 0.5  # per EM call: large enough that a 3× broken mechanism is visible at these run counts
AUDIT_SAMPLES = 4  # n for the sampling searches: dfs/bfs make ≤ n + 1 EM calls
AUDIT_RUNS = {"direct": 20_000, "uniform": 10_000, "random-walk": 10_000, "dfs": 8_000, "bfs": 8_000, "explore": 10_000}


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Two-sided exact interval for a binomial proportion, missing with probability ≤ level."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(level / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - level / 2, k + 1, n - k))
    return lo, hi


def ratio_lower_bounds(
    counts_a: Counter, runs_a: int, counts_b: Counter, runs_b: int, n_outputs: int
) -> dict[int, float]:
    """For every output seen ≥ MIN_COUNT times on both datasets: a lower confidence bound of
    max(p_a/p_b, p_b/p_a).

    Bound: one Clopper–Pearson interval per (output, dataset) at level AUDIT_ALPHA/(2·n_outputs),
    where n_outputs counts every *possible* output (every admissible context), so by Bonferroni
    all intervals hold at once with probability ≥ 1 − AUDIT_ALPHA whatever outputs the data show.
    When they hold, p_a ≤ e^ε·p_b implies lo_a/hi_b ≤ e^ε (and symmetrically): a mechanism that
    is ε-OCDP on (D, D') fails `max bound ≤ e^ε` with probability ≤ AUDIT_ALPHA.
    """
    level = AUDIT_ALPHA / (2 * n_outputs)
    out = {}
    for o in set(counts_a) & set(counts_b):
        ka, kb = counts_a[o], counts_b[o]
        if ka < MIN_COUNT or kb < MIN_COUNT:
            continue
        a_lo, a_hi = clopper_pearson(ka, runs_a, level)
        b_lo, b_hi = clopper_pearson(kb, runs_b, level)
        out[o] = max(a_lo / b_hi, b_lo / a_hi)
    return out


def release_counts(case: SmallCase, search: str, eps1: float, runs: int, seed0: int) -> tuple[Counter, int]:
    oracle = FrozenCOE(case.evaluator(VERIFIER))
    start, _ = find_start(oracle)
    counts = Counter()
    calls = 0
    for seed in range(seed0, seed0 + runs):
        res = run_search(search, oracle, eps1, make_source(seed)[0], start=start, samples=AUDIT_SAMPLES)
        counts[res.mask] += 1
        calls = max(calls, res.trace.n_em_calls)
    return counts, calls


def audit(d: SmallCase, d_minus: SmallCase, search: str, run_eps1: float, runs: int) -> dict[int, float]:
    counts_d, calls_d = release_counts(d, search, run_eps1, runs, seed0=0)
    counts_m, calls_m = release_counts(d_minus, search, run_eps1, runs, seed0=10 * runs)
    assert max(calls_d, calls_m) <= derive_budget(1.0, search, AUDIT_SAMPLES, "tight").max_em_calls
    bounds = ratio_lower_bounds(counts_d, runs, counts_m, runs, d.space.n_admissible)
    assert len(bounds) >= 2, f"too few outputs seen {MIN_COUNT}+ times on both datasets to audit: {bounds}"
    return bounds


@pytest.mark.slow
@pytest.mark.parametrize("search", SEARCHES)
def test_privacy_audit_on_neighbouring_datasets(d, d_minus, search):
    assert set(fast_coe(d, VERIFIER)) == set(fast_coe(d_minus, VERIFIER))
    assert find_start(d.evaluator(VERIFIER)) == find_start(d_minus.evaluator(VERIFIER))
    calls = derive_budget(1.0, search, AUDIT_SAMPLES, "tight").max_em_calls
    budget = derive_budget(EPS1 * calls, search, AUDIT_SAMPLES, "tight")  # total ε = (calls)·ε1
    assert math.isclose(budget.epsilon1, EPS1)
    bounds = audit(d, d_minus, search, budget.epsilon1, AUDIT_RUNS[search])
    worst = max(bounds.values())
    assert worst <= math.exp(budget.epsilon), (
        f"{search}: an output's probability ratio is above e^ε = {math.exp(budget.epsilon):.3f} "
        f"with confidence 1 − {AUDIT_ALPHA}: lower bound {worst:.3f}"
    )


@pytest.mark.slow
def test_privacy_audit_catches_a_broken_mechanism(d, d_minus):
    # Negative control: `direct` run with 3·ε1 while claiming ε = ε1. The true worst ratio on
    # (D, D') is (e^{3ε1} + 1)/2 ≈ 2.74 > e^{ε1} ≈ 1.65, and the same check must see it.
    claimed = derive_budget(EPS1, "direct", AUDIT_SAMPLES, "tight")
    bounds = audit(d, d_minus, "direct", 3 * claimed.epsilon1, AUDIT_RUNS["direct"])
    assert max(bounds.values()) > math.exp(claimed.epsilon)
    # and the honest run's exact worst ratio is below the bound, with room to spare
    u_d = np.array(list(fast_coe(d, VERIFIER).values()))
    u_m = np.array(list(fast_coe(d_minus, VERIFIER).values()))
    p, q = em_probabilities(u_d, EPS1), em_probabilities(u_m, EPS1)
    assert max(np.max(p / q), np.max(q / p)) < math.exp(EPS1)
    p3, q3 = em_probabilities(u_d, 3 * EPS1), em_probabilities(u_m, 3 * EPS1)
    assert math.isclose(max(np.max(p3 / q3), np.max(q3 / p3)), (math.exp(3 * EPS1) + 1) / 2, rel_tol=0.01)
