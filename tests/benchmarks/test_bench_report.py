"""Writers, targets and statistics of the bench: BENCHMARKS.md sections, Markdown, verdicts, CIs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from benchmarks.coe_match import max_log_ratio
from benchmarks.experiments import mean_ci
from benchmarks.report import update_section
from benchmarks.tables import make_table, markdown, seconds
from benchmarks.targets import at_least, at_most


def test_update_section_replaces_only_its_own_block(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    update_section(path, "bench", "## bench\nfirst")
    update_section(path, "reproduce", "## reproduce\nR1")
    text = path.read_text()
    assert text.startswith("# pcor-sql benchmarks")
    path.write_text(text + "\nhand-written tail\n")
    update_section(path, "bench", "## bench\nsecond")
    text = path.read_text()
    assert "second" in text and "first" not in text
    assert "R1" in text and "hand-written tail" in text
    assert text.count("<!-- pcor-sql bench:begin -->") == 1
    assert text.index("second") < text.index("R1")  # replaced in place, not appended


def test_markdown_escapes_pipes_and_lists_notes():
    t = make_table("T", ["a", "b"], [["x|y", 1]], ["note one"])
    md = markdown(t)
    assert "| x\\|y | 1 |" in md and "- note one" in md and md.startswith("### T")


def test_seconds_units():
    assert seconds(2.5e-5) == "25 µs"
    assert seconds(0.0123) == "12.3 ms"
    assert seconds(3.456) == "3.46 s"
    assert seconds(600.0) == "10.0 min"
    assert seconds(None) == "—"


def test_targets_verdicts():
    assert at_most("t", 0.4, 0.5, seconds).met is True
    assert at_most("t", 0.6, 0.5, seconds).met is False
    assert at_most("t", None, 0.5, seconds).met is None
    assert at_most("m", 4.0, 4.0, str, strict=True).met is False
    assert at_least("s", 60.0, 50.0, str).met is True
    # A lower bound at or above the goal proves it; one below proves nothing either way.
    assert at_least("s", 60.0, 50.0, str, lower_bound=True).met is True
    assert at_least("s", 30.0, 50.0, str, lower_bound=True).met is None


def test_mean_ci_is_the_student_t_interval():
    xs = list(np.random.default_rng(1).uniform(size=25))
    mean, lo, hi = mean_ci(xs, 0.90)
    ref = stats.t.interval(0.90, len(xs) - 1, loc=np.mean(xs), scale=stats.sem(xs))
    assert mean == pytest.approx(np.mean(xs)) and (lo, hi) == pytest.approx(ref)
    assert mean_ci([0.5], 0.90) == (0.5, 0.5, 0.5)


def test_max_log_ratio_of_the_direct_em():
    eps1 = 0.2
    a = {1: 10.0, 2: 8.0, 3: 5.0}
    assert max_log_ratio(a, dict(a), eps1) == pytest.approx(0.0, abs=1e-12)
    assert max_log_ratio(a, {9: 1.0}, eps1) is None
    # D' loses context 1 and one unit of utility on context 2: the exact law, by hand.
    b = {2: 7.0, 3: 5.0}
    pa = {c: math.exp(eps1 * u) / sum(math.exp(eps1 * x) for x in a.values()) for c, u in a.items()}
    pb = {c: math.exp(eps1 * u) / sum(math.exp(eps1 * x) for x in b.values()) for c, u in b.items()}
    want = max(abs(math.log(pa[c] / pb[c])) for c in (2, 3))
    assert max_log_ratio(a, b, eps1) == pytest.approx(want)


def test_exp_text_never_overflows():
    from benchmarks.reproduce_tables import exp_text

    assert exp_text(0.2) == "1.2214 (e^0.2)"
    assert exp_text(0.20001670156) == "1.2214 (e^0.200017)"  # a tiny excess stays visible
    assert exp_text(5000.0) == "e^5000"  # math.exp would overflow here
