"""Private (β, r)-anomaly identification: the mdd-functions and Construction 1 (DESIGN.md §3).

Notation. x is the multiset of the dataset's records (a histogram over the universe X with a
metric d); x_i is the multiplicity of value i and B = B_x(i, r) = #{records j : d(i, j) ≤ r}
(i's own copies included). The query is

    g(i, x) = 1  iff  x_i ≥ 1 and B ≤ β          ((β, r)-anomaly).

B is an integer, so B ≤ β and B ≤ ⌊β⌋ are the same query: a real β ≥ 1 is accepted and every
formula below uses β := ⌊β⌋ (its mdd-function is that of ⌊β⌋ because the query is identical).

mdd-function Δ_G(i, x): the fewest records to add or remove to flip g (exact; Lemma 4.3):

    x_i = 0, B < β  →  1                (add one copy of i)
    x_i = 0, B ≥ β  →  2 + B − β        (add i, then remove B + 1 − β neighbours)
    x_i > 0, B ≤ β  →  min(x_i, β + 1 − B)   (remove every copy of i, or fill the ball)
    x_i > 0, B > β  →  B − β            (empty the ball down to β, keeping a copy of i)

k-sensitive neighbourhood (1 ≤ k ≤ β + 1): j is sensitive in x iff B_x(j, r) ≥ β + 1 − k;
x ~ y iff they differ by one copy of a value sensitive in x or in y. On that graph

    λ_k(i, x) = Δ_G(i, x)                        if B ≥ β + 1 − k (i sensitive),
              = β + 1 − B + min(0, x_i − k)      otherwise,

is ≥ 1, a lower bound on the graph's mdd and 1-Lipschitz on its edges (checked by exhaustive
search in the tests). k = β + 1 makes every value sensitive, so the graph is the ordinary
neighbourhood graph G and λ_{β+1} = Δ_G.

Construction 1, U_λ: output g(i, x) with probability 1 − p, its negation with probability

    p = e^{−ε(λ(i, x) − 1)} / (1 + e^ε).

Privacy (Theorem 4.1, proof sketch). Fix i and neighbours x ~ y of the graph λ belongs to.
If g(i, x) ≠ g(i, y), the mdd at both is 1, so λ(i, x) = λ(i, y) = 1 (λ ≥ 1 and a lower bound),
p = 1/(1 + e^ε) at both, and the two output laws are (e^ε, 1)/(1 + e^ε) and (1, e^ε)/(1 + e^ε):
ratio exactly e^ε. If g agrees, |λ(i, x) − λ(i, y)| ≤ 1 (Lipschitz), so the flip probabilities
are within a factor e^ε; and for the kept answer, with λ(i, y) = λ(i, x) − 1 ≥ 1,
1 − p(y) ≥ e^{−ε}(1 − p(x)) ⇔ p(x) ≤ 1/(1 + e^ε), which holds. Hence every output has
probability ratio ≤ e^ε on every edge:
  * λ = Δ_G (`privacy="dp"`): ε-differential privacy, and pareto optimal — no ε-DP mechanism
    is more accurate on any dataset (Theorem 4.4).
  * λ = λ_k (`privacy="sp"`): (ε, k)-sensitive privacy (Theorem 4.6).
Answers to several records (or repeated answers) use independent coins, so they compose
sequentially on the same graph: n answers at ε each cost n·ε (`anomaly_privacy_cost`).

Accuracy. P(error) = p exactly (Claim 2). For a record that is not sensitive
(B < β + 1 − k), λ_k − 1 ≥ β + 1 − k − B, so P(error) ≤ e^{−ε|β + 1 − k − B|}
(`sp_error_bound`): exponentially small for strong anomalies, where the DP mechanism's error
stays near 1/(1 + e^ε) whenever x_i = 1.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from pcor_sql.core.accounting import DpCost, SpCost
from pcor_sql.core.option_spec import parse_choice
from pcor_sql.core.randomness import Source, bernoulli
from pcor_sql.errors import InternalError, UserError
from pcor_sql.core.choices import Notion, Privacy

PRIVACY_MODES = (Privacy.DP.value, Privacy.SP.value)
NORMS = ("l1", "l2", "linf")


@dataclass(frozen=True)
class AnomalyParams:
    """Validated parameters of a (β, r)-anomaly query and its mechanism.

    `beta` is the integer threshold ⌊β⌋ the formulas use; `beta_given` what the user passed.
    `k` is None for privacy="dp" (the DP mechanism is the k = β + 1 case, every value sensitive).

    The object names the mechanism that runs: `mechanism_lambda` picks λ by `privacy`, and
    `answer_cost` / `notion` state what one answer costs from the same field, so the notion
    charged is the mechanism's own (DESIGN.md §6 "Notions are kept apart"), never re-derived
    from how an option was spelled.
    """

    beta: int
    beta_given: float
    radius: float
    epsilon: float
    privacy: Privacy
    k: int | None

    def __post_init__(self) -> None:
        if type(self.privacy) is not Privacy or (self.privacy is Privacy.SP) != (self.k is not None):
            raise InternalError(f"anomaly parameters need a Privacy and k exactly under sp, got {self.privacy!r}, "
                                f"k={self.k!r} (build them with validate_params)")

    @property
    def notion(self) -> Notion:
        """The ledger notion of this mechanism's answers: ε-DP for λ = Δ_G, (ε, k)-SP for λ_k."""
        return Notion.SP if self.privacy is Privacy.SP else Notion.DP

    def answer_cost(self) -> DpCost | SpCost:
        """What one answer of this mechanism costs, in its own notion."""
        cost = SpCost(self.epsilon, self.k) if self.privacy is Privacy.SP else DpCost(self.epsilon)
        if cost.notion != self.notion:
            raise InternalError(f"the {self.privacy} mechanism's cost is of notion {cost.notion}")
        return cost

    @property
    def name(self) -> str:
        """The mechanism's name in the history: `anomaly/<privacy>`, with `/k=<k>` under (ε, k)-SP."""
        return "/".join(["anomaly", str(self.privacy)] + ([f"k={self.k}"] if self.privacy is Privacy.SP else []))


@dataclass(frozen=True)
class AnomalyCost:
    """Privacy cost of a batch of answers by sequential composition."""

    epsilon_per_answer: float
    answers: int
    epsilon_total: float
    privacy: str
    k: int | None
    guarantee: str


def _real(value: object, name: str, example: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"{name} must be a number, got {value!r}", f"pass e.g. {example}")
    out = float(value)
    if math.isnan(out) or math.isinf(out):
        raise UserError(f"{name} must be finite, got {value!r}", f"pass e.g. {example}")
    return out


def validate_norm(norm: object) -> str:
    """The canonical norm name (any ASCII case: `core.option_spec.parse_choice`); a UserError
    names the accepted ones."""
    return parse_choice("norm", norm, NORMS)


def validate_params(beta: object, radius: object, epsilon: object, privacy: object, k: object) -> AnomalyParams:
    """Check β ≥ 1, r ≥ 0 finite, ε > 0 finite, privacy dp|sp and (sp only) k ∈ 1..⌊β⌋+1.

    β is a count threshold (B ≤ β); a real β ≥ 1 is accepted and used as ⌊β⌋, which asks the
    same question. k is ignored by the DP mechanism.
    """
    b = _real(beta, "beta", "beta = 5")
    if b < 1:
        raise UserError(f"beta must be ≥ 1, got {beta!r}", "pass a count threshold such as beta = 5")
    r = _real(radius, "radius", "radius = 1000")
    if r < 0:
        raise UserError(f"radius must be ≥ 0, got {radius!r}", "pass a distance such as radius = 1000")
    eps = _real(epsilon, "epsilon", "epsilon = 0.5")
    if eps <= 0:
        raise UserError(f"epsilon must be > 0, got {epsilon!r}", "pass e.g. epsilon = 0.5")
    mode = Privacy(parse_choice("privacy", privacy, PRIVACY_MODES))
    beta_int = int(math.floor(b))
    if mode is Privacy.DP:
        return AnomalyParams(beta_int, b, r, eps, mode, None)
    if isinstance(k, bool) or not isinstance(k, numbers.Real) or not float(k).is_integer():
        raise UserError(f"k must be an integer, got {k!r}", f"pass k between 1 and {beta_int + 1}")
    kk = int(k)
    if not 1 <= kk <= beta_int + 1:
        raise UserError(f"k must be between 1 and beta + 1 = {beta_int + 1}, got {k!r}", "pass e.g. k = 1")
    return AnomalyParams(beta_int, b, r, eps, mode, kk)


def _counts(multiplicity: object, ball: object) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(multiplicity, dtype=np.int64)
    b = np.asarray(ball, dtype=np.int64)
    if m.shape != b.shape:
        raise InternalError(f"multiplicity and ball shapes differ: {m.shape} vs {b.shape}")
    if np.any(m < 0) or np.any(b < m):
        raise InternalError("ball counts must satisfy 0 ≤ x_i ≤ B_x(i, r)")
    return m, b


def _beta(beta: int) -> int:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Integral) or beta < 1:
        raise InternalError(f"beta must be an integer ≥ 1 here (validated upstream), got {beta!r}")
    return int(beta)


def anomaly_truth(multiplicity: object, ball: object, beta: int) -> np.ndarray:
    """g(i, x): True iff x_i ≥ 1 and B_x(i, r) ≤ β (elementwise)."""
    m, b = _counts(multiplicity, ball)
    return (m >= 1) & (b <= _beta(beta))


def mdd_dp(multiplicity: object, ball: object, beta: int) -> np.ndarray:
    """Δ_G(i, x), the exact mdd-function of g on the ordinary neighbourhood graph (see module doc)."""
    m, b = _counts(multiplicity, ball)
    beta = _beta(beta)
    return np.select(
        [(m == 0) & (b < beta), (m == 0) & (b >= beta), (m > 0) & (b <= beta)],
        [np.ones_like(b), 2 + b - beta, np.minimum(m, beta + 1 - b)],
        default=b - beta,
    ).astype(np.int64)


def sensitive(ball: object, beta: int, k: int) -> np.ndarray:
    """Whether a value with ball count B is sensitive for (β, k): B ≥ β + 1 − k."""
    return np.asarray(ball, dtype=np.int64) >= _beta(beta) + 1 - _check_k(k, beta)


def _check_k(k: int, beta: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= beta + 1:
        raise InternalError(f"k must be an integer in 1..β+1 here (validated upstream), got {k!r}")
    return int(k)


def lambda_k(multiplicity: object, ball: object, beta: int, k: int) -> np.ndarray:
    """λ_k(i, x): Δ_G for sensitive i (B ≥ β + 1 − k), else β + 1 − B + min(0, x_i − k).

    A 1-Lipschitz lower bound ≥ 1 on the mdd of the k-sensitive neighbourhood graph.
    """
    m, b = _counts(multiplicity, ball)
    beta = _beta(beta)
    k = _check_k(k, beta)
    return np.where(b >= beta + 1 - k, mdd_dp(m, b, beta), beta + 1 - b + np.minimum(0, m - k)).astype(np.int64)


def mechanism_lambda(multiplicity: object, ball: object, params: AnomalyParams) -> np.ndarray:
    """λ of the chosen mechanism: Δ_G for "dp", λ_k for "sp"."""
    if params.privacy is Privacy.DP:
        return mdd_dp(multiplicity, ball, params.beta)
    if params.k is None:
        raise InternalError("sensitive privacy needs k")
    return lambda_k(multiplicity, ball, params.beta, params.k)


def flip_probability(lam: object, epsilon: float) -> np.ndarray:
    """p = e^{−ε(λ − 1)} / (1 + e^ε), computed in log space (no overflow for large ε or λ).

    p ≤ 1/(1 + e^ε) < 1/2 because λ ≥ 1; for huge ε(λ − 1) it underflows to 0.0, which is the
    correct value to within 1e-308.
    """
    lam_arr = np.asarray(lam, dtype=np.float64)
    if np.any(lam_arr < 1):
        raise InternalError("λ must be ≥ 1 for Construction 1")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InternalError(f"ε must be finite and > 0, got {epsilon!r}")
    return np.exp(-epsilon * (lam_arr - 1.0) - np.logaddexp(0.0, epsilon))


def construction1(truth: object, flip_prob: object, source: Source) -> np.ndarray:
    """Sample U_λ: each answer is the true bit, negated with its probability p (independently).

    The coin is `bernoulli`: "U < p" for an exact uniform U read 64 bits at a time, so
    P(flip) is exactly the double p, however small (2⁻⁶⁰ and 5e-324 included): no grid error.
    It reads one 64-bit word per answer with 0 < p (plus one per tie, probability 2⁻⁶⁴) from
    `source` (secure by default upstream, seeded for tests).

    Remaining numeric error: only p's own rounding in `flip_probability`. Its exponent
    a = ε(λ − 1) + ln(1 + e^ε) = −ln p takes about three roundings and exp one, so p is within a
    relative (3|ln p| + 2)·2⁻⁵³ ≤ 2⁻⁴¹ of the exact value while p ≥ 2⁻¹⁰²² (a ≤ 708); below
    that p is subnormal (absolute error ≤ 2⁻¹⁰⁷⁵, and 0 once a > 745). So the e^ε ratio of the
    module docstring holds with ε + 2⁻⁴⁰ for flip probabilities ≥ 2⁻¹⁰²², and smaller ones
    are off by at most 2⁻¹⁰²² each in total variation.
    """
    t = np.asarray(truth, dtype=bool)
    p = np.asarray(flip_prob, dtype=np.float64)
    if t.shape != p.shape:
        raise InternalError(f"truth and flip probabilities differ in shape: {t.shape} vs {p.shape}")
    if np.any(p < 0) or np.any(p > 0.5):
        raise InternalError("Construction 1 flip probabilities lie in [0, 1/2]")
    if t.size == 0:
        return t.copy()
    return t ^ bernoulli(source, p)


def sp_error_bound(ball: object, beta: int, k: int, epsilon: float) -> np.ndarray:
    """Theorem 4.6: for a non-sensitive record (B < β + 1 − k) the SP error is ≤ e^{−ε|β+1−k−B|}.

    Returned for every record; the bound is meaningful only where `sensitive` is False.
    """
    b = np.asarray(ball, dtype=np.float64)
    return np.exp(-epsilon * np.abs(_beta(beta) + 1 - _check_k(k, beta) - b))


def anomaly_privacy_cost(epsilon: float, answers: int, privacy: str, k: int | None) -> AnomalyCost:
    """The cost of `answers` independent Construction 1 answers on one dataset.

    Each answer is ε-DP (dp) or (ε, k)-SP (sp) on its graph; the coins are independent, so the
    output-probability ratios multiply along an edge: n answers cost n·ε in the same sense
    (sequential composition holds for any privacy notion defined by a per-edge ratio bound).
    """
    if not isinstance(answers, numbers.Integral) or answers < 0:
        raise InternalError(f"answers must be a count, got {answers!r}")
    total = float(epsilon) * int(answers)
    if privacy == Privacy.DP:
        guarantee = f"{total:g}-differential privacy (sequential composition of {answers} × ε = {epsilon:g})"
    elif privacy == Privacy.SP:
        guarantee = (
            f"({total:g}, {k})-sensitive privacy (sequential composition of {answers} × ε = {epsilon:g})"
        )
    else:
        raise InternalError(f"unknown privacy mode {privacy!r}")
    return AnomalyCost(float(epsilon), int(answers), total, privacy, k, guarantee)
