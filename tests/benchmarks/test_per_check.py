"""`benchmarks.per_check` runs end to end on a small table and reports every verifier it was given."""

from benchmarks.per_check import measure


def test_per_check_reports_each_verifier_and_the_parts():
    out = measure(rows=20_000, contexts=20, verifiers=["grubbs", "zscore", "histogram", "lof"])
    assert out["cells"] == 1200 and out["contexts"] == 20
    for name in ("grubbs", "zscore", "histogram", "lof"):
        assert out[name]["us"] > 0 and 0 <= out[name]["valid"] <= 20
        assert out[name]["reference_us"] > 0 and out[name]["same_verdicts"]
    assert set(out["parts"]) >= {"membership", "population (n, min, max)", "moments (mean, m2)", "grubbs verdict"}


def test_per_check_times_both_lof_rules_beside_the_numpy_reference():
    out = measure(rows=20_000, contexts=30, verifiers=["lof", "lof-plain"])
    for name in ("lof", "lof-plain"):
        assert out[name]["reference_us"] > 0
        assert out[name]["same_verdicts"]  # the compiled check's verdicts, context by context


def test_per_check_runs_on_a_wide_shape_along_moves():
    # wide500 (497 free bits): 20,000 rows fill enough cells (> jit.WALK_CELLS) for the walks.
    out = measure(rows=20_000, contexts=40, verifiers=["grubbs", "lof"], shape="wide500", order="moves")
    assert out["cells"] > 4096 and out["shape"] == "wide500" and out["order"] == "moves"
    for name in ("grubbs", "lof"):
        assert out[name]["us"] > 0 and out[name]["same_verdicts"]


def test_moves_are_one_admissible_move_apart():
    import numpy as np

    from benchmarks.per_check import contexts_of
    from pcor_sql.core.space import Attribute, ContextSpace

    space = ContextSpace([Attribute("a", tuple(range(30))), Attribute("b", tuple(range(4)))], [0, 0])
    masks = contexts_of(space, np.random.default_rng(0), 50, "moves")
    assert len(masks) == 50 and all(space.is_admissible(m) for m in masks)
    assert all(b in space.neighbours(a) for a, b in zip(masks, masks[1:]))
