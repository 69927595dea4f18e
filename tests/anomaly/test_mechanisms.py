"""Exhaustive and statistical checks of the (β, r)-anomaly mechanisms (DESIGN.md §3).

Small world: the universe is 4 points 0, 1, 2, 3 on a line (d = |a − b|); the small histograms
are all x with counts 0..3 (256 of them). Shortest paths are computed by a vectorised BFS
over a box of histograms with counts 0..M. A path that leaves the box needs at least M − 2
steps from a small histogram, so

    true mdd  ≥  min(box distance, M − 2)   and   true mdd ≤ box distance,

i.e. the box distance is exact whenever it is ≤ M − 2, and min(box, M − 2) is always a valid
lower bound. M is chosen above every formula value, so each comparison below is certified.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pcor_sql.anomaly import mechanisms as A
from pcor_sql.core.randomness import SecureRandom
from pcor_sql.errors import InternalError, UserError
from tests.core.scripted_source import ONES, ScriptedWords

U = 4  # universe size
SMALL = 3  # counts 0..SMALL in the small histograms
BETAS = (1, 2, 3, 4)
RADII = (0, 1, 2)


def _box(M: int) -> np.ndarray:
    """Counts of every histogram in the box, shape (M+1,)*U + (U,)."""
    grids = np.meshgrid(*[np.arange(M + 1)] * U, indexing="ij")
    return np.stack(grids, axis=-1)


def _balls(h: np.ndarray, r: float) -> np.ndarray:
    """B(j, r) for every value j and every histogram: shape h.shape."""
    near = np.array([[abs(a - b) <= r for b in range(U)] for a in range(U)], dtype=np.int64)
    return h @ near.T


def _shift(arr: np.ndarray, axis: int, step: int, fill: float) -> np.ndarray:
    """out[y] = arr[y + step·e_axis] (fill outside the box)."""
    out = np.full_like(arr, fill)
    src = [slice(None)] * arr.ndim
    dst = [slice(None)] * arr.ndim
    if step > 0:
        src[axis], dst[axis] = slice(step, None), slice(None, -step)
    else:
        src[axis], dst[axis] = slice(None, step), slice(-step, None)
    out[tuple(dst)] = arr[tuple(src)]
    return out


def _bfs(targets: np.ndarray, up_edge: list[np.ndarray]) -> np.ndarray:
    """Distance from every box node to the target set; up_edge[j][y] says y — y+e_j is an edge."""
    dist = np.where(targets, 0.0, np.inf)
    while True:
        new = dist.copy()
        for j in range(U):
            # from y to y + e_j, and from y + e_j down to y, only along existing edges
            new = np.minimum(new, np.where(up_edge[j], _shift(dist, j, +1, np.inf) + 1, np.inf))
            new = np.minimum(new, _shift(np.where(up_edge[j], dist + 1, np.inf), j, -1, np.inf))
        if np.array_equal(new, dist):
            return dist
        dist = new


def _small(arr: np.ndarray) -> np.ndarray:
    return arr[(slice(0, SMALL + 1),) * U]


class World:
    """Box-BFS mdd for every (i, small x) in G (k=None) or in the k-sensitive graph."""

    def __init__(self, beta: int, r: float):
        self.beta, self.r = beta, r
        # On small histograms Δ_G ≤ max(β + 1, 12 − β) (B ≤ 12, and B ≤ 9 when x_i = 0) and
        # λ_k ≤ max(Δ_G, β + 1); M − 2 must reach them (asserted below, so a bad M fails loudly).
        self.M = 3 + max(12 - beta, beta + 1)
        self.h = _box(self.M)
        self.ball = _balls(self.h, r)
        self.h_small = _small(self.h)
        self.ball_small = _small(self.ball)

    def g(self, i: int) -> np.ndarray:
        return (self.h[..., i] >= 1) & (self.ball[..., i] <= self.beta)

    def edges(self, k: int | None) -> list[np.ndarray]:
        shape = self.h.shape[:-1]
        if k is None:
            return [np.ones(shape, dtype=bool) for _ in range(U)]
        # y — y+e_j: j sensitive in y or in y + e_j; B grows with y, so "in y + e_j" suffices.
        return [self.ball[..., j] + 1 >= self.beta + 1 - k for j in range(U)]

    def mdd_lower_and_exact(self, i: int, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(certified lower bound on the true mdd, box distance) on the small histograms."""
        g = self.g(i)
        edges = self.edges(k)
        d_to_true = _bfs(g, edges)
        d_to_false = _bfs(~g, edges)
        box = _small(np.where(g, d_to_false, d_to_true))
        return np.minimum(box, self.M - 2), box


@pytest.fixture(scope="module", params=[(b, r) for b in BETAS for r in RADII])
def world(request) -> World:
    return World(*request.param)


def test_delta_g_is_the_brute_force_mdd(world: World):
    for i in range(U):
        lower, box = world.mdd_lower_and_exact(i, None)
        formula = A.mdd_dp(world.h_small[..., i], world.ball_small[..., i], world.beta)
        assert np.all(box <= world.M - 2), "box too small to certify exactness"
        assert np.array_equal(formula, box.astype(np.int64)), (world.beta, world.r, i)


def test_lambda_k_is_a_lipschitz_lower_bound_on_the_sensitive_graph(world: World):
    beta = world.beta
    for k in range(1, beta + 2):
        for i in range(U):
            lower, _ = world.mdd_lower_and_exact(i, k)
            lam = A.lambda_k(world.h_small[..., i], world.ball_small[..., i], beta, k)
            assert lam.min() >= 1
            assert np.all(lam <= lower), (beta, world.r, k, i)
            # 1-Lipschitz on every edge x — x+e_j of the k-sensitive graph with x small.
            edges = [_small(e) for e in world.edges(k)]
            for j in range(U):
                up = world.h_small.copy()
                up[..., j] += 1
                lam_up = A.lambda_k(up[..., i], _balls(up, world.r)[..., i], beta, k)
                diff = np.abs(lam_up - lam)
                assert np.all(diff[edges[j]] <= 1), (beta, world.r, k, i, j)
        if k == beta + 1:
            # every value is sensitive: the graph is G and λ_{β+1} = Δ_G
            for i in range(U):
                h, b = world.h_small[..., i], world.ball_small[..., i]
                assert np.array_equal(A.lambda_k(h, b, beta, k), A.mdd_dp(h, b, beta))


def test_lambda_k_is_not_vacuous():
    """For k = 1 the SP λ exceeds Δ_G on isolated records (this is where SP gains accuracy)."""
    assert A.lambda_k([1], [1], 5, 1)[0] == 5 > A.mdd_dp([1], [1], 5)[0] == 1


def _output_laws(lam: np.ndarray, truth: np.ndarray, eps: float) -> np.ndarray:
    """P(output = 1) under Construction 1."""
    p = A.flip_probability(lam, eps)
    return np.where(truth, 1.0 - p, p)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("privacy", ["dp", "sp"])
def test_exact_output_ratio_on_every_small_edge(privacy: str, eps: float):
    for beta in BETAS:
        for r in RADII:
            h = _box(SMALL)
            ks = [None] if privacy == "dp" else list(range(1, beta + 2))
            for k in ks:
                for j in range(U):
                    up = h.copy()
                    up[..., j] += 1
                    b_lo, b_up = _balls(h, r), _balls(up, r)
                    edge = np.ones(h.shape[:-1], bool) if k is None else (b_up[..., j] >= beta + 1 - k)
                    for i in range(U):
                        laws = []
                        for hist, ball in ((h, b_lo), (up, b_up)):
                            m, b = hist[..., i], ball[..., i]
                            lam = A.mdd_dp(m, b, beta) if k is None else A.lambda_k(m, b, beta, k)
                            laws.append(_output_laws(lam, A.anomaly_truth(m, b, beta), eps))
                        q1, q2 = laws
                        bound = math.exp(eps) * (1 + 1e-12)
                        for a, c in ((q1, q2), (q2, q1), (1 - q1, 1 - q2), (1 - q2, 1 - q1)):
                            assert np.all((a <= bound * c)[edge]), (privacy, beta, r, k, j, i)


def test_dp_ratio_is_tight_where_g_flips():
    """x = (1,0,0,0) is a (1, 0)-anomaly at value 0; adding a copy makes it a non-anomaly."""
    eps = 0.7
    q1 = _output_laws(A.mdd_dp([1], [1], 1), A.anomaly_truth([1], [1], 1), eps)[0]
    q2 = _output_laws(A.mdd_dp([2], [2], 1), A.anomaly_truth([2], [2], 1), eps)[0]
    assert q1 / q2 == pytest.approx(math.exp(eps), rel=1e-12)


def _hoeffding(n: int, delta: float) -> float:
    """|empirical mean − p| ≤ t with probability ≥ 1 − δ (two-sided Hoeffding)."""
    return math.sqrt(math.log(2 / delta) / (2 * n))


@pytest.mark.parametrize("lam,eps", [(1, 0.5), (2, 0.5), (4, 0.3), (3, 1.0)])
def test_empirical_flip_rate_matches_formula(lam: int, eps: float):
    n = 200_000
    p = float(A.flip_probability([lam], eps)[0])
    assert p == pytest.approx(math.exp(-eps * (lam - 1)) / (1 + math.exp(eps)), rel=1e-12)
    tol = _hoeffding(n, 1e-6)
    for truth_value in (True, False):
        truth = np.full(n, truth_value)
        for source in (np.random.default_rng(1234 + lam), SecureRandom()):
            out = A.construction1(truth, np.full(n, p), source)
            assert abs(np.mean(out != truth) - p) <= tol, (lam, eps, truth_value, type(source).__name__)


def test_construction1_keeps_flip_probabilities_below_two_to_the_minus_53():
    """The coin is exact: p = 2⁻⁶⁰ flips on exactly 16 of the 2⁶⁴ first words, p = 5e-324 on
    16 zero words followed by a word < 2¹⁴ (2⁻¹⁰⁷⁴ of the mass). The old "u < p" with a
    53-bit u flipped neither, ever."""
    truth = np.array([True, False, True, False])
    p = np.array([2.0**-60, 2.0**-60, 5e-324, 5e-324])
    # words in draw order: the four first words, then one word per tie (only the third is a tie)
    src = ScriptedWords([15, 16, 0, 1] + [0] * 15 + [2**14 - 1])
    assert A.construction1(truth, p, src).tolist() == [False, False, False, False]
    assert src.read == 4 + 16
    src = ScriptedWords([16, 15, 1, 0] + [0] * 15 + [2**14])
    assert A.construction1(truth, p, src).tolist() == [True, True, True, False]
    # a tiny p from the formula (ε = 1, λ = 40: p ≈ 3e-18 ≈ 2⁻⁵⁸) flips on ⌊p·2⁶⁴⌋ = 57 first words
    lam_p = A.flip_probability([40], 1.0)
    assert 2.0**-64 < lam_p[0] < 2.0**-53
    whole = int(np.floor(np.ldexp(lam_p[0], 64)))
    assert A.construction1([True], lam_p, ScriptedWords([whole - 1])).tolist() == [False]
    assert A.construction1([True], lam_p, ScriptedWords([ONES])).tolist() == [True]


def test_empirical_dp_ratio_on_neighbours():
    """Seeded: the e^ε ratio on the tight pair holds for the sampled frequencies (Hoeffding, δ = 1e-6)."""
    eps, n = 0.5, 200_000
    rng = np.random.default_rng(99)
    freqs = []
    for m, b in ((1, 1), (2, 2)):
        lam = A.mdd_dp([m] * n, [b] * n, 1)
        truth = A.anomaly_truth([m] * n, [b] * n, 1)
        freqs.append(np.mean(A.construction1(truth, A.flip_probability(lam, eps), rng)))
    tol = _hoeffding(n, 1e-6)
    f1, f2 = freqs
    assert f1 - tol <= math.exp(eps) * (f2 + tol)
    assert (1 - f2) - tol <= math.exp(eps) * ((1 - f1) + tol)
    # and the ratio is attained, not just bounded
    assert abs(f1 / f2 - math.exp(eps)) < 0.05


def test_accuracy_bound_for_non_sensitive_records():
    eps = 0.4
    for beta in range(1, 9):
        for k in range(1, beta + 2):
            for b in range(1, beta + 1 - k):  # non-sensitive: B < β + 1 − k
                for m in range(1, b + 1):
                    p = A.flip_probability(A.lambda_k([m], [b], beta, k), eps)[0]
                    assert p <= A.sp_error_bound([b], beta, k, eps)[0] * (1 + 1e-12)
                    assert not A.sensitive([b], beta, k)[0]


def test_flip_probability_is_stable_for_large_values():
    p = A.flip_probability([1, 10_000], 700.0)
    assert np.all(np.isfinite(p)) and p[1] == 0.0 and p[0] > 0


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(beta=0.5), "beta"),
        (dict(beta=float("nan")), "beta"),
        (dict(beta="5"), "beta"),
        (dict(radius=-1), "radius"),
        (dict(radius=float("inf")), "radius"),
        (dict(epsilon=0), "epsilon"),
        (dict(epsilon=-0.1), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(k=0), "k"),
        (dict(k=7), "k"),
        (dict(k=1.5), "k"),
        (dict(privacy="ldp"), "privacy"),
    ],
)
def test_bad_parameters_are_user_errors(kwargs, needle):
    args = dict(beta=5, radius=1.0, epsilon=0.5, privacy="sp", k=1) | kwargs
    with pytest.raises(UserError) as err:
        A.validate_params(**args)
    assert needle in str(err.value) and " — " in str(err.value)


def test_parameter_normalisation():
    p = A.validate_params(5.7, 0, 0.5, "SP", 6)
    assert (p.beta, p.beta_given, p.k, p.privacy) == (5, 5.7, 6, "sp")
    with pytest.raises(UserError):
        A.validate_params(5.7, 0, 0.5, "sp", 7)
    assert A.validate_params(5, 0, 0.5, "dp", 99).k is None  # k is not used by DP
    assert A.validate_norm("L2") == "l2"
    with pytest.raises(UserError, match="norm"):
        A.validate_norm("l3")


def test_internal_invariants():
    with pytest.raises(InternalError):
        A.mdd_dp([2], [1], 3)  # B < x_i is impossible
    with pytest.raises(InternalError):
        A.flip_probability([0], 1.0)


def test_privacy_cost_composes():
    cost = A.anomaly_privacy_cost(0.5, 4, "sp", 2)
    assert cost.epsilon_total == 2.0 and "(2, 2)-sensitive" in cost.guarantee
    assert A.anomaly_privacy_cost(0.25, 2, "dp", None).epsilon_total == 0.5


def test_exhaustive_world_covers_every_case_of_the_table():
    """Guard against a vacuous exhaustive test: all four Δ_G cases occur in the small world."""
    w = World(2, 1)
    m, b = w.h_small[..., 1], w.ball_small[..., 1]
    cases = {(bool(mm == 0), bool(bb <= 2), bool(bb < 2)) for mm, bb in zip(m.ravel(), b.ravel())}
    assert {(True, True, True), (True, False, False), (False, True, False), (False, False, False)} <= cases
    assert len(list(itertools.product(range(SMALL + 1), repeat=U))) == m.size


@pytest.mark.parametrize(("privacy", "k", "cost", "notion", "name"), [
    ("SP", 2, "SpCost(epsilon=0.5, k=2)", "sp", "anomaly/sp/k=2"),
    ("sP", 1, "SpCost(epsilon=0.5, k=1)", "sp", "anomaly/sp/k=1"),
    ("Dp", 2, "DpCost(epsilon=0.5)", "dp", "anomaly/dp"),
])
def test_the_mechanism_states_its_own_notion_and_cost(privacy, k, cost, notion, name):
    """DESIGN.md §6: the notion charged is the mechanism's; λ and the cost read one field."""
    p = A.validate_params(5, 1, 0.5, privacy, k)
    assert repr(p.answer_cost()) == cost and p.notion == notion == p.answer_cost().notion and p.name == name
    assert (p.privacy is A.Privacy.SP) == (notion == "sp")
    lam = A.mechanism_lambda(np.array([1]), np.array([1]), p)
    one = np.array([1])
    expected = A.lambda_k(one, one, 5, k) if notion == "sp" else A.mdd_dp(one, one, 5)
    assert lam.tolist() == expected.tolist()


def test_parameters_of_no_known_mechanism_are_refused():
    with pytest.raises(InternalError):
        A.AnomalyParams(5, 5.0, 1.0, 0.5, "SP", 1)  # a string, not the mechanism's Privacy
    with pytest.raises(InternalError):
        A.AnomalyParams(5, 5.0, 1.0, 0.5, A.Privacy.DP, 1)  # ε-DP has no k
