"""Help lines and numbers as a reader meets them: a help line that starts with a symbol or an
option's value keeps its spelling (β, r, k, sp, tight, direct), β's definition is the one the
code counts (DESIGN.md §3: B_x(i, r) counts i's own copies), and ε prints as the decimal it is
meant to be (display only: the ledger keeps the exact values)."""

from __future__ import annotations

import csv
import io
import os

import pytest

from pcor_sql.request_specs import explain_specs, identify_specs
from tests.cli.cli_helpers import QUERY, invoke


def help_text(*command: str) -> str:
    os.environ.setdefault("COLUMNS", "200")
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stdout.split())


@pytest.mark.parametrize("wrong", ["Β:", "Sp:", "R:", "K of", "L1, l2", "other records"])
def test_identify_anomaly_help_keeps_symbols_and_values(wrong):
    assert wrong not in help_text("identify-anomaly")


def test_identify_anomaly_help_defines_beta_as_the_code_counts():
    text = help_text("identify-anomaly")
    assert "β: an anomaly has at most β records within the radius, itself included" in text
    assert "r: the ball radius" in text and "sp: (ε, k)-sensitive privacy" in text and "k of (ε, k)" in text


@pytest.mark.parametrize("wrong", ["Direct, uniform", "Tight (monotone"])
def test_explain_outlier_help_keeps_values(wrong):
    text = help_text("explain-outlier")
    assert wrong not in text
    assert "Reproducible randomness" in text and "Budget ledger name" in text  # prose is still capitalised


def test_every_spec_help_is_capitalised_only_when_it_starts_with_prose():
    from pcor_sql.cli.parameters import help_sentence

    for spec in [*explain_specs().values(), *identify_specs().values()]:
        shown, first = help_sentence(spec), str(spec.help).split()[0]
        if first.rstrip(",:") in {str(c) for c in (spec.choices or ())} or len(first.rstrip(",:")) == 1:
            assert shown == spec.help, spec.name


def test_budget_status_prints_the_remaining_as_the_decimal_it_is(db):
    assert invoke("budget", "set-limit", "main.salaries", "0.5", "--db", str(db)).exit_code == 0
    for epsilon in ("0.2", "0.1", "0.1"):
        result = invoke("explain-outlier", QUERY, "--db", str(db), "--epsilon", epsilon, "--verifier", "grubbs")
        assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(invoke("budget", "status", "--db", str(db), "--format", "csv").stdout)))
    [ocdp] = [r for r in rows if r["notion"] == "ocdp"]
    assert (ocdp["spent"], ocdp["remaining"], ocdp["limit"]) == ("0.4", "0.1", "0.5"), ocdp
    assert '"remaining": 0.1,' in invoke("budget", "status", "--db", str(db), "--format", "json").stdout


def test_the_budget_picture_says_no_limit_in_words():
    pytest.importorskip("matplotlib")
    from pcor_sql.plots import budget_figure

    fig = budget_figure([{"unit": "memory.main.t", "notion": "dp", "spent": 0.5, "limit": None},
                         {"unit": "memory.main.u", "notion": "dp", "spent": 0.25, "limit": 1.0}])
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert texts == ["0.5 spent, no limit", "0.25 of 1"], texts
