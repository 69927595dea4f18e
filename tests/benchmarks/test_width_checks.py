"""`benchmarks.width_checks` runs end to end on a small births-shaped table (wide enough to walk)."""

from benchmarks.width_checks import main, measure


def test_width_checks_report_both_checks_by_member_cells_with_the_same_verdicts():
    out = measure(states=25, years=2, count=60, seed=3)  # 25 × 2 × 12 × 7 = 4,200 cells ≥ jit.WALK_CELLS
    assert out["cells"] == 4200 and out["rows"] == 25 * 730
    for name in ("lof", "histogram"):
        assert out[name]["same"]
        groups = out[name]["groups"]
        assert sum(g["contexts"] for g in groups) == 60
        assert all(g["new_us"] > 0 and g["old_us"] > 0 for g in groups)


def test_width_checks_command_prints_the_table(capsys):
    assert main(["--states", "25", "--years", "2", "--contexts", "30"]) == 0
    text = capsys.readouterr().out
    assert "85,680" not in text and "4,200 cells" in text and "member cells" in text


def test_width_checks_is_a_benchmarks_command():
    from tests.benchmarks.app_helpers import assert_error, invoke

    result = invoke("width-checks", "--states", "25", "--years", "2", "--contexts", "20")
    assert result.exit_code == 0, result.output
    assert "4,200 cells" in result.stdout and "the same" in result.stdout
    assert_error(invoke("width-checks", "--contexts", "0"), "--contexts must be at least 1")
