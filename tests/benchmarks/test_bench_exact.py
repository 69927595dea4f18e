"""The exact largest utility by best-first scan equals the maximum over the enumerated COE."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.exact import best_first_max, free_word, utilities_by_word
from pcor_sql.core.start import find_start
from tests.benchmarks.tiny_data import tiny_con, tiny_run

# histogram's default rel = 0.0025 flags nothing below N = 400 (V's own bin holds ≥ 1 value).
SPECS = {"grubbs": "grubbs", "lof": "lof", "histogram": "histogram(rel=0.05)", "zscore": "zscore"}


@pytest.fixture(scope="module")
def con():
    connection = tiny_con()
    yield connection
    connection.close()


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("utility", ["population", "overlap"])
def test_best_first_equals_enumeration(con, name, utility):
    run = tiny_run(con, SPECS[name])
    space = run.space(0)
    start = find_start(run.oracle(0))[0] if utility == "overlap" else None
    ev = run.oracle(0, utility=utility)  # resolves the same start: the release's validity-only search
    masks, utils = ev.coe(1 << 20)
    assert len(masks) > 0
    found = best_first_max(ev, space, utilities_by_word(run.lattice_sizes(0), utility, space, start), 1 << 20)
    assert found.utility == float(np.max(utils))
    assert ev.is_valid(found.mask) and ev.utility(found.mask) == found.utility
    assert found.checks <= space.n_admissible


def test_free_word_inverts_from_free(con):
    space = tiny_run(con).space(0)
    for w in range(space.n_admissible):
        assert free_word(space, space.from_free(w)) == w


def test_scan_cap_and_empty_coe(con):
    # z > 1e6: V is an outlier nowhere; the scan verifies every context and says COE is empty.
    run = tiny_run(con, "zscore", verifier_options={"z": 1e6})
    space = run.space(0)
    u = utilities_by_word(run.lattice_sizes(0), "population", space, None)
    found = best_first_max(run.oracle(0), space, u, max_checks=1 << 20)
    assert found.utility is None and found.exhausted and found.checks == space.n_admissible
    capped = best_first_max(run.oracle(0), space, u, max_checks=3)
    assert capped.utility is None and not capped.exhausted and capped.checks == 3
