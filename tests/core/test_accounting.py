"""Privacy arithmetic: total ε → ε1 for every search × accounting rule, with exact constants."""

import math

import numpy as np
import pytest

from pcor_sql.core.accounting import (
    ACCOUNTINGS,
    SEARCHES,
    Budget,
    derive_budget,
    em_calls,
    spent,
    validate_epsilon,
    validate_samples,
)
from pcor_sql.core.mechanism import em_cost
from pcor_sql.errors import UserError

# (search, accounting) → (ε1, worst-case EM calls, cost per call) for ε = 0.2, n = 50 (DESIGN.md §2).
EXPECTED_02_50 = {
    ("direct", "tight"): (0.2, 1, 0.2),
    ("direct", "paper"): (0.1, 1, 0.2),
    ("uniform", "tight"): (0.2, 1, 0.2),
    ("uniform", "paper"): (0.1, 1, 0.2),
    ("random-walk", "tight"): (0.2, 1, 0.2),
    ("random-walk", "paper"): (0.1, 1, 0.2),
    ("dfs", "tight"): (0.2 / 51, 51, 0.2 / 51),
    ("dfs", "paper"): (0.2 / 102, 51, 0.2 / 51),
    ("bfs", "tight"): (0.2 / 51, 51, 0.2 / 51),
    ("bfs", "paper"): (0.2 / 102, 51, 0.2 / 51),
    # explore: validity-only collection, one EM whatever n is (DESIGN.md §7)
    ("explore", "tight"): (0.2, 1, 0.2),
    ("explore", "paper"): (0.1, 1, 0.2),
}


def test_the_table_covers_every_search_and_rule():
    assert set(EXPECTED_02_50) == {(s, a) for s in SEARCHES for a in ACCOUNTINGS}


@pytest.mark.parametrize(("search", "accounting"), sorted(EXPECTED_02_50))
def test_derive_budget_exact_constants(search, accounting):
    eps1, calls, per_call = EXPECTED_02_50[(search, accounting)]
    b = derive_budget(0.2, search, 50, accounting)
    assert isinstance(b, Budget)
    assert b.epsilon == 0.2
    assert b.accounting == accounting
    assert b.max_em_calls == calls
    assert math.isclose(b.epsilon1, eps1, rel_tol=1e-15)
    assert math.isclose(b.cost_per_call, per_call, rel_tol=1e-15)
    # the cost of one call is the mechanism's own cost under the rule's assumption
    assert math.isclose(b.cost_per_call, em_cost(b.epsilon1, monotone=accounting == "tight"), rel_tol=1e-15)
    # spending the worst case uses exactly the total, never more
    assert math.isclose(spent(b, b.max_em_calls), 0.2, rel_tol=1e-12)
    assert spent(b, b.max_em_calls) <= 0.2 * (1 + 1e-12)


def test_exact_quotients():
    assert derive_budget(0.2, "bfs", 50, "tight").epsilon1 == 0.2 / 51
    assert derive_budget(0.2, "bfs", 50, "paper").epsilon1 == 0.2 / 102
    assert derive_budget(0.2, "dfs", 1, "tight").epsilon1 == 0.1
    assert derive_budget(0.2, "dfs", 1, "paper").epsilon1 == 0.05
    assert derive_budget(1.0, "direct", 7, "paper").epsilon1 == 0.5
    # samples only matter for the graph searches that spend one EM per step
    assert derive_budget(1.0, "uniform", 1000, "tight").epsilon1 == 1.0
    assert derive_budget(1.0, "random-walk", 3, "tight").epsilon1 == 1.0


@pytest.mark.parametrize("n", [1, 2, 50, 1000])
def test_em_calls(n):
    assert em_calls("bfs", n) == n + 1
    assert em_calls("dfs", n) == n + 1
    for s in ("direct", "uniform", "random-walk"):
        assert em_calls(s, n) == 1


def test_spent_partial():
    b = derive_budget(0.2, "bfs", 50, "tight")
    assert spent(b, 0) == 0.0
    assert math.isclose(spent(b, 10), 10 * 0.2 / 51, rel_tol=1e-15)
    p = derive_budget(0.2, "bfs", 50, "paper")
    assert math.isclose(spent(p, 10), 10 * 2 * 0.2 / 102, rel_tol=1e-15)


def test_tight_needs_a_monotone_utility():
    with pytest.raises(UserError):
        derive_budget(0.2, "bfs", 50, "tight", monotone=False)
    b = derive_budget(0.2, "bfs", 50, "paper", monotone=False)
    assert b.epsilon1 == 0.2 / 102


@pytest.mark.parametrize("eps", [0, 0.0, -0.1, -math.inf, math.nan, math.inf, "abc", None, [0.2], 10**400, -(10**400)])
def test_bad_total_epsilon_is_a_user_error(eps):
    with pytest.raises(UserError):
        validate_epsilon(eps)
    with pytest.raises(UserError):
        derive_budget(eps, "bfs", 50, "tight")


@pytest.mark.parametrize("eps", [1e-12, 0.2, "0.5", 10])
def test_good_total_epsilon(eps):
    assert validate_epsilon(eps) == float(eps)


@pytest.mark.parametrize("n", [0, -1, 1.5, 2.0, True, "5", None])
def test_bad_samples_is_a_user_error(n):
    with pytest.raises(UserError):
        validate_samples(n)
    with pytest.raises(UserError):
        derive_budget(0.2, "bfs", n, "tight")


def test_unknown_search_or_accounting_is_a_user_error():
    with pytest.raises(UserError):
        derive_budget(0.2, "astar", 50, "tight")
    with pytest.raises(UserError):
        em_calls("BFS", 50)
    with pytest.raises(UserError):
        derive_budget(0.2, "bfs", 50, "loose")
    with pytest.raises(UserError):
        derive_budget(0.2, "bfs", 50, "Tight")


def test_a_boolean_is_not_an_epsilon():
    # `epsilon=True` would otherwise run silently at ε = 1, five times the default budget;
    # samples already refuse booleans the same way.
    with pytest.raises(UserError):
        validate_epsilon(True)
    with pytest.raises(UserError):
        derive_budget(False, "direct", 50, "tight")


def test_numpy_integers_are_samples():
    # Python-API callers often hold counts as numpy integers (array lengths, pandas cells).
    assert validate_samples(np.int64(50)) == 50
    assert derive_budget(0.2, "bfs", np.int32(50), "tight").epsilon1 == 0.2 / 51
