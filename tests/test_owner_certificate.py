"""The owner's certificate (DESIGN.md §6 "Two roles"): with `owner_view`, a release carries the verifier's
statistic for the record in the released context and the threshold it was held to, marked not
for release, so that an owner can believe a release without recomputing it. Each is checked
here against an independent computation over the released context's rows; analysts never see it."""

from __future__ import annotations

import json
import math

import duckdb
import numpy as np
import pytest
from scipy import stats

import pcor_sql
from tests.cli.cli_helpers import invoke
from tests.test_analyst import make_owner

QUERY = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    return con


def _release(con, verifier):
    e = pcor_sql.explain_outlier(con, QUERY, verifier=verifier, owner_view=True, seed=3, ledger=":memory:",
                                 warn=lambda m: None)
    values = np.array([r[0] for r in con.execute(e.explanation_sql).fetchall()], dtype=np.float64)
    return e, e.owner.certificate, values, float(e.record["salary"])


def test_grubbs_shows_g_against_its_critical_value(con):
    e, c, values, v = _release(con, "grubbs")
    n = values.size
    g = abs(v - values.mean()) / values.std(ddof=1)
    t = stats.t.ppf(1 - 0.05 / (2 * n), n - 2)
    crit = (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))
    assert (c["statistic"], c["not_for_release"], c["population"]) == ("G", True, n)
    assert c["value"] == pytest.approx(g, rel=1e-9) and c["threshold"] == pytest.approx(crit, rel=1e-9)
    assert c["value"] > c["threshold"] and n == e.owner.population


def test_zscore_shows_z_against_its_threshold(con):
    _, c, values, v = _release(con, "zscore(z=3)")
    assert c["statistic"] == "z" and c["threshold"] == 3.0
    assert c["value"] == pytest.approx(abs(v - values.mean()) / values.std(ddof=1), rel=1e-9)
    assert c["value"] > c["threshold"]


def test_histogram_shows_the_bin_count_against_rel_times_n(con):
    _, c, values, v = _release(con, "histogram")
    counts, edges = np.histogram(values, bins=math.isqrt(values.size - 1) + 1)
    i = min(int(np.searchsorted(edges, v, side="right")) - 1, counts.size - 1)
    assert c["statistic"] == "bin count" and c["value"] == counts[i]
    assert c["threshold"] == pytest.approx(0.0025 * values.size) and c["value"] < c["threshold"]


def test_lof_shows_the_score_against_its_threshold(con):
    from sklearn.neighbors import LocalOutlierFactor

    _, c, values, v = _release(con, "lof(duplicates='plain')")
    # The plain rule is scikit-learn's where no value near the record is tied (DESIGN.md §2).
    model = LocalOutlierFactor(n_neighbors=20).fit(values.reshape(-1, 1))
    [i] = np.flatnonzero(values == v)
    assert c["statistic"] == "LOF" and c["threshold"] == 1.5
    assert c["value"] == pytest.approx(-model.negative_outlier_factor_[i], rel=1e-6)
    assert c["value"] > c["threshold"]


def test_the_owner_json_and_text_carry_it_marked_not_for_release():
    done = invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--owner-view", "--ledger", ":memory:",
                  "--format", "json")
    [shown] = json.loads(done.stdout)
    c = shown["owner"]["certificate"]
    assert c["not_for_release"] is True and c["statistic"] == "G" and c["value"] > c["threshold"]
    text = invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--owner-view", "--ledger", ":memory:").stdout
    assert "NOT FOR RELEASE — owner diagnostics" in text and "verdict: G = " in text and "against threshold" in text


def test_an_analyst_output_lacks_it():
    owner = make_owner()
    analyst = owner.analyst()
    results = [analyst.explain_outlier("people", 42, verifier="grubbs", epsilon=0.1)]
    results += analyst.sql("EXPLAIN OUTLIER SELECT pay FROM people WHERE id IN (42, 43) USING grubbs "
                           "WITH (epsilon = 0.1)")
    for result in results:
        shown = json.dumps(result.as_dict())
        for word in ("certificate", "statistic", "threshold\"", "not_for_release", "\"owner\"", "G_crit"):
            assert word not in shown, (word, shown)
        assert not hasattr(result, "owner")
