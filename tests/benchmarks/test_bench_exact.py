"""The exact largest utility by best-first scan equals the maximum over the enumerated COE."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.exact import best_first_max, free_word, lattice_sizes, utilities_by_word
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.engine.evaluator import Evaluator
from pcor_sql.engine.release import resolve_start
from tests.benchmarks.tiny_data import tiny_case, tiny_con


@pytest.fixture(scope="module")
def case():
    con = tiny_con()
    yield (con, *tiny_case(con))
    con.close()


@pytest.mark.parametrize("name", ["grubbs", "lof", "histogram", "zscore"])
@pytest.mark.parametrize("utility", ["population", "overlap"])
def test_best_first_equals_enumeration(case, name, utility):
    con, schema, summary, row, v, space = case
    # histogram's default rel = 0.0025 flags nothing below N = 400 (V's own bin holds ≥ 1 value).
    verifier = default_registry().make(name, **({"rel": 0.05} if name == "histogram" else {}))
    ev = Evaluator(con, summary, space, v, verifier)
    start = resolve_start(ev, None)[0] if utility == "overlap" else None
    if start is not None:
        ev = Evaluator(con, summary, space, v, verifier, utility="overlap", start=start)
    masks, utils = Evaluator(con, summary, space, v, verifier, utility=utility, start=start).coe(1 << 20)
    assert len(masks) > 0
    sizes = lattice_sizes(ev)
    found = best_first_max(ev, utilities_by_word(sizes, utility, space, start), max_checks=1 << 20)
    assert found.utility == float(np.max(utils))
    assert ev.is_valid(found.mask) and ev.utility(found.mask) == found.utility
    assert found.checks <= space.n_admissible


def test_lattice_sizes_are_population_sizes(case):
    con, schema, summary, row, v, space = case
    ev = Evaluator(con, summary, space, v, default_registry().make("zscore"))
    sizes = lattice_sizes(ev)
    for w in (0, 1, 5, space.n_admissible - 1):
        mask = space.from_free(w)
        assert sizes[w] == ev.population_size(mask)
        assert free_word(space, mask) == w


def test_scan_cap_and_empty_coe(case):
    con, schema, summary, row, v, space = case
    # z > 1e6: V is an outlier nowhere; the scan verifies every context and says COE is empty.
    ev = Evaluator(con, summary, space, v, default_registry().make("zscore", z=1e6))
    u = utilities_by_word(lattice_sizes(ev), "population", space, None)
    found = best_first_max(ev, u, max_checks=1 << 20)
    assert found.utility is None and found.exhausted and found.checks == space.n_admissible
    capped = best_first_max(ev, u, max_checks=3)
    assert capped.utility is None and not capped.exhausted and capped.checks == 3
