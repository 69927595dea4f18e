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
