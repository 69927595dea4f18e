"""The compiled LOF check as the evaluator runs it (`engine.lof_checks`): on every context that
seeded BFS releases check, and on random contexts of a tie-heavy table, its verdict and
population size equal the numpy reference's (`Lof.check` on the summary's population), under
both rules for duplicates; a metric too wide for LOF's distances is still one UserError."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import pcor_sql
import pcor_sql.engine.lof_checks as lof_checks_module
from pcor_sql.core.verifiers.grubbs import Grubbs
from pcor_sql.core.verifiers.lof import Lof
from pcor_sql.core.jit import NO_WORDS, cell_index, flat_bits
from pcor_sql.core.verifiers.lof_kernel import lof_context
from pcor_sql.engine.compiled_checks import compiled_check
from pcor_sql.engine.lof_checks import LofRecord, lof_check
from pcor_sql.errors import UserError
from tests.engine.small_data import create_enum_table, load_case
from tests.engine.test_compiled_checks import summary_of

RULES = ("distinct", "plain")
LOF_CHECK = lof_check  # the real one, which the cross-check wraps while it is patched in


class CrossCheck:
    """Wraps `lof_check` so that every compiled verdict is compared with the reference's."""

    def __init__(self):
        self.checked = 0
        self.differing: list[tuple] = []

    def __call__(self, summary, space, verifier, v):
        check = LOF_CHECK(summary, space, verifier, v)
        if check is None:
            return None

        def both(mask):
            verdict, n = check(mask)
            member = summary.member(space, mask)
            pop = summary.population(member, v)
            want = bool(verifier.check(pop))
            self.checked += 1
            if (verdict, n) != (want, pop.n):
                self.differing.append((verifier, v, bin(mask), verdict, want, n, pop.n))
            return verdict, n

        return both


@pytest.fixture(scope="module")
def datasets():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    yield con
    con.close()


@pytest.mark.filterwarnings("ignore::pcor_sql.errors.PrivacyWarning")
def test_every_context_of_seeded_bfs_releases(datasets, monkeypatch):
    spy = CrossCheck()
    monkeypatch.setattr(lof_checks_module, "lof_check", spy)
    for rid in (42, 171):
        for rule in RULES:
            for seed in (1, 2):
                pcor_sql.explain_outliers(datasets, f"SELECT salary FROM salaries WHERE id = {rid}",
                                          verifier=f"lof(duplicates='{rule}')", search="bfs", seed=seed, samples=20)
    salaries = spy.checked
    assert salaries > 3000
    # A tie-heavy metric (ages: 98 integers over 110,000 rows), record aged 99.
    for seed in (1, 2):
        pcor_sql.explain_outliers(datasets, "SELECT victim_age FROM homicides WHERE id = 691",
                                  verifier="lof(threshold=1.2)", search="bfs", seed=seed, samples=10)
    assert spy.checked > salaries + 100
    assert spy.differing == []


def test_random_contexts_of_a_tie_heavy_table(datasets):
    # Ages: 98 distinct integers over 110,000 rows (≈ 5,000 copies of the common ones).
    rng = np.random.default_rng(3)
    for rid in (691, 7, 1234):
        case = load_case(datasets, "homicides", rid, metric="victim_age")
        for rule in RULES:
            for k, threshold in ((20, 1.5), (3, 1.1)):
                lof = Lof(k=k, threshold=threshold, duplicates=rule)
                check = lof_check(case.summary, case.space, lof, case.v)
                for _ in range(40):
                    mask = case.space.random_admissible(rng)
                    pop = case.summary.population(case.summary.member(case.space, mask), case.v)
                    assert check(mask) == (bool(lof.check(pop)), pop.n), (rid, rule, k)


def test_compiled_scores_equal_the_reference_on_a_summary(datasets):
    # Scores, not only verdicts (rtol 1e-9: lof_reference explains the bound).
    rng = np.random.default_rng(9)
    case = load_case(datasets, "salaries", 42)
    record = LofRecord(case.summary.runs(), case.v)
    space = case.space
    flat = flat_bits(case.summary.coords, space.offsets, space.offsets[0] + space.anchor[0])
    packed = {rule: record.packed(20, rule, flat, cell_index(case.summary.coords, space.offsets, space.t)) for rule in RULES}
    for _ in range(60):
        mask = space.random_admissible(rng)
        member = case.summary.member(space, mask)
        pop = case.summary.population(member, case.v)
        for rule in RULES:
            want = Lof(duplicates=rule).score(pop)
            # As the evaluator calls it (membership compiled), and on the member cells given.
            got, n, _ = lof_context(mask, NO_WORDS, record.values, *packed[rule])
            alone, n_alone, _ = record.score(member, 20, rule)
            assert n == n_alone == pop.n
            assert got == alone or (np.isnan(got) and np.isnan(alone))
            assert np.isclose(got, want, rtol=1e-9, atol=0.0, equal_nan=True), (got, want, rule)


def test_only_exactly_lof_on_sorted_runs(datasets):
    case = load_case(datasets, "salaries", 42)

    class Mine(Lof):  # may override check: the reference path
        pass

    assert compiled_check(case.summary, case.space, Mine(), case.v) is None
    assert compiled_check(case.summary, case.space, Lof(), case.v) is not None


def test_wide_contexts_use_the_word_path():
    """A space of more than 63 bits passes contexts as uint64 words to the kernel's membership:
    the same verdicts and sizes as the reference, under both rules."""
    rng = np.random.default_rng(5)
    cells = [list(np.round(rng.normal(100, 10, rng.integers(0, 6)), 1)) for _ in range(40 * 30)]
    cells[0] = [100.0, 400.0, 101.5]
    summary, space = summary_of(cells, (40, 30))
    assert space.t > 64
    masks = [space.random_admissible(rng) for _ in range(80)] + [space.full, space.v_mask]
    assert sum(m >= 1 << 63 for m in masks) > 20
    for v in (400.0, 100.0):
        for lof in (Lof(), Lof(duplicates="plain"), Lof(k=3, threshold=1.1)):
            check = compiled_check(summary, space, lof, v)
            verdicts = []
            for mask in masks:
                pop = summary.population(summary.member(space, mask), v)
                got = check(mask)
                assert got == (bool(lof.check(pop)), pop.n), (lof, v, bin(mask))
                verdicts.append(got[0])
            assert any(verdicts) or v == 100.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the summary's moments overflow (not LOF's concern)
def test_a_metric_too_wide_for_distances_is_one_user_error():
    con = duckdb.connect()
    create_enum_table(con, "wide", {"dept": ("a", "b")}, [(1, "a", 1e308), (2, "a", 0.0), (3, "b", -1e308), (4, "b", 5.0)])
    case = load_case(con, "wide", 2)
    evaluator = case.evaluator(Lof())
    with pytest.raises(UserError, match="too wide"):
        for mask in (case.space.v_mask, case.space.full):
            evaluator.is_valid(mask)
    con.close()


def test_node_of_reads_rows_as_it_reads_masks():
    # `node_of` from the masks' words (numpy) gives what it gives from the Python ints, on a
    # node's neighbours (either rule of recognition) and on batches that are not one node's.
    from pcor_sql.core.verifiers.walk_batches import context_matrix

    rng = np.random.default_rng(7)
    bits = 200
    words = (bits + 63) // 64
    for _ in range(60):
        parent = int(rng.integers(0, 2 ** 62)) << int(rng.integers(0, 130))
        flips = rng.choice(bits, size=int(rng.integers(2, 40)), replace=False).tolist()
        masks = [parent ^ (1 << f) for f in flips]
        kind = int(rng.integers(0, 3))
        if kind == 1:  # one mask two bits from the node
            extra = (int(flips[0]) + 1) % bits
            masks[-1] ^= 1 << extra if extra not in flips[-1:] else 1 << ((extra + 1) % bits)
        elif kind == 2:  # a mask twice
            masks[-1] = masks[0]
        rows = context_matrix(masks, words)
        assert lof_checks_module.node_of(masks, rows) == lof_checks_module.node_of(masks)
    parent = 1 << 150
    masks = [parent ^ (1 << 3), parent ^ (1 << 140), parent ^ (1 << 199)]
    assert lof_checks_module.node_of(masks, context_matrix(masks, words)) == (parent, [3, 140, 199])
