"""`python -m benchmarks verifiers`: the shares are the per-row verdicts counted, the synthetic
wage table has the shape it claims, and the command writes its section."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.verifier_shares import VERIFIERS, WholeTable, flagged_shares, moments, wage_survey
from pcor_sql.core.verifiers.base import ArrayPopulation
from pcor_sql.core.verifiers.registry import default_registry
from tests.benchmarks.app_helpers import assert_error, invoke as run


def _verifiers():
    registry = default_registry()
    return [registry.make(name, **options) for _, name, options in VERIFIERS]


def test_shares_are_the_row_verdicts_counted():
    rng = np.random.default_rng(5)
    x = np.concatenate((np.round(rng.normal(50, 8, 400)), [90.0, 91.0, 140.0], np.full(30, 60.0)))
    got = flagged_shares(x, _verifiers())
    for verifier, entry in zip(_verifiers(), got):
        # One check per row on the plain array population: the same count.
        flagged = sum(verifier.check(ArrayPopulation.of(x, v)) for v in x)
        assert entry["flagged_rows"] == flagged and entry["share"] == flagged / x.size
        assert entry["checks"] == np.unique(x).size and entry["check_us"] > 0
    assert any(e["flagged_rows"] for e in got)


def test_whole_table_population_is_the_array_population():
    x = np.sort(np.round(np.random.default_rng(1).lognormal(3, 0.5, 300), 1))
    mean, m2 = moments(x)
    for v in (x[0], x[150], x[-1]):
        a, b = WholeTable(x, v, mean, m2), ArrayPopulation(x, float(v))
        assert (a.n, a.min, a.max) == (b.n, b.min, b.max)
        assert np.isclose(a.mean, b.mean, rtol=1e-12) and np.isclose(a.m2, b.m2, rtol=1e-12)
        assert a.around(7) == b.around(7) and np.array_equal(a.between(20, 30), b.between(20, 30))
        assert a.count_between(20, 30, False) == b.count_between(20, 30, False)


def test_the_wage_table_is_tie_heavy_and_top_coded():
    x = wage_survey(3000, 21)
    values, counts = np.unique(x, return_counts=True)
    assert x.size == 3000 and 300 < values.size < 800
    assert counts[-1] >= 120 and values[-1] == x.max()  # the top code holds the 120 largest


def test_command_writes_its_section(tmp_path):
    out, md = tmp_path / "out", tmp_path / "BENCHMARKS.md"
    result = run("verifiers", "--tables", "wages", "--rows", "600", "--out-dir", str(out),
                 "--update-benchmarks", "--benchmarks-file", str(md))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "verifiers.json").read_text())
    (table,) = data["tables"]
    assert table["rows"] == 600 and [v["verifier"] for v in table["verifiers"]] == [v[0] for v in VERIFIERS]
    assert data["targets"][0]["met"] is not None
    text = md.read_text()
    assert "<!-- pcor-sql verifiers:begin -->" in text and "python -m benchmarks verifiers --tables wages --rows 600" in text
    assert "before (plain rule)" in text and "Rows flagged among all rows" in result.stdout
    again = run("verifiers", "--from-json", str(out / "verifiers.json"), "--out-dir", str(tmp_path / "again"))
    assert again.exit_code == 0 and "before (plain rule)" in again.stdout


def test_bad_options():
    assert_error(run("verifiers", "--tables", "nope"), "--tables")
    assert_error(run("verifiers", "--rows", "1"), "--rows")
