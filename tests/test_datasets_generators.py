"""The dataset generators: they reproduce the shipped files, and what they plant is what they say.

The verdicts use independent reference forms of DESIGN.md §2's Grubbs and LOF (written here,
not the package's verifiers, so a bug there cannot hide a bad dataset): record 42 of
`salaries` and every other planted record must be a Grubbs (α = 0.05) and LOF (k = 20,
threshold 1.5) outlier inside its own cell, and not a Grubbs outlier of the whole table.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from pcor_sql.resources import shipped_dir

FOLDER = shipped_dir("datasets")
SCRIPTS = {"salaries": "generate_salaries.py", "homicides": "generate_homicides.py", "diamonds": "convert_diamonds.py"}
METRIC = {"salaries": "salary", "homicides": "victim_age"}


def _script(name: str):
    path = FOLDER / SCRIPTS[name]
    spec = importlib.util.spec_from_file_location(f"pcor_sql_dataset_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built():
    """Each synthetic dataset rebuilt from its generator: (table, planted records)."""
    return {name: _script(name).build() for name in METRIC}


def _json(filename: str) -> dict:
    return json.loads((FOLDER / filename).read_text(encoding="utf-8"))


# --- reference verdicts (DESIGN.md §2) -------------------------------------------------------


def grubbs_outlier(values: np.ndarray, v: float, alpha: float = 0.05) -> bool:
    n = values.size
    s = values.std(ddof=1)
    if n < 3 or s <= 0:
        return False
    t = stats.t.ppf(1 - alpha / (2 * n), n - 2)
    g_crit = (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))
    return abs(v - values.mean()) / s > g_crit


def lof_1d(values: np.ndarray, index: int, k: int = 20) -> float:
    """LOF of values[index] among values (1-D), ties included in every neighbourhood.

    In 1-D the k nearest other points of the point at sorted position p lie among positions
    p−k..p+k, so k-distances cost O(nk); a neighbourhood is the contiguous run of points
    within the k-distance."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    n = xs.size
    kk = min(k, n - 1)
    offsets = np.concatenate([np.arange(-kk, 0), np.arange(1, kk + 1)])
    idx = np.arange(n)[:, None] + offsets[None, :]
    inside = (idx >= 0) & (idx < n)
    dist = np.where(inside, np.abs(xs[np.clip(idx, 0, n - 1)] - xs[:, None]), np.inf)
    kdist = np.partition(dist, kk - 1, axis=1)[:, kk - 1]

    def neighbours(p: int) -> np.ndarray:
        lo = max(int(np.searchsorted(xs, xs[p] - kdist[p], "left")) - 1, 0)
        hi = min(int(np.searchsorted(xs, xs[p] + kdist[p], "right")) + 1, n)
        run = np.arange(lo, hi)
        return run[(run != p) & (np.abs(xs[run] - xs[p]) <= kdist[p])]

    def lrd(p: int) -> float:
        nb = neighbours(p)
        return 1.0 / (np.maximum(kdist[nb], np.abs(xs[p] - xs[nb])).mean() + 1e-10)

    p = int(np.flatnonzero(order == index)[0])
    return float(np.mean([lrd(o) for o in neighbours(p)]) / lrd(p))


def test_reference_lof_matches_brute_force_and_sklearn():
    from sklearn.neighbors import LocalOutlierFactor

    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 1, 300), [9.0, -7.5]])  # continuous: no ties
    sk = -LocalOutlierFactor(n_neighbors=20).fit(x.reshape(-1, 1)).negative_outlier_factor_
    for i in (0, 5, 150, 300, 301):
        assert lof_1d(x, i) == pytest.approx(sk[i], rel=1e-9)
    # With ties, against a brute-force O(n²) form of the same definition.
    y = np.round(rng.normal(0, 3, 120))
    d = np.abs(y[:, None] - y[None, :])
    np.fill_diagonal(d, np.inf)
    kd = np.sort(d, axis=1)[:, 19]

    def lrd(p):
        nb = np.flatnonzero(d[p] <= kd[p])
        return 1 / (np.maximum(kd[nb], d[p, nb]).mean() + 1e-10)

    for i in (0, 17, 64, int(np.argmax(y))):
        nb = np.flatnonzero(d[i] <= kd[i])
        assert lof_1d(y, i) == pytest.approx(np.mean([lrd(o) for o in nb]) / lrd(i), rel=1e-9)
    assert grubbs_outlier(x, 9.0) and not grubbs_outlier(x, x[0])


# --- the generators reproduce the shipped files ----------------------------------------------


@pytest.mark.parametrize("name", list(METRIC))
def test_regenerating_gives_the_shipped_table(built, name):
    table, planted = built[name]
    shipped = pq.read_table(FOLDER / f"{name}.parquet")
    assert table.schema.equals(shipped.schema, check_metadata=False)
    assert table.equals(shipped), f"datasets/{SCRIPTS[name]} no longer reproduces {name}.parquet"
    assert planted == _json("planted_outliers.json")[name]
    assert _script(name).domains() == _json("domains.json")[name]


def test_diamonds_domains_match_the_converter():
    assert _script("diamonds").DOMAINS == _json("domains.json")["diamonds"]
    assert _json("planted_outliers.json")["diamonds"] == []


def _diamonds_source() -> Path | None:
    """A local plotnine wheel or diamonds.csv, if one is at hand (the test never downloads)."""
    given = os.environ.get("PCOR_SQL_DIAMONDS_SOURCE")
    if given:
        return Path(given)
    spec = importlib.util.find_spec("plotnine")
    if spec is not None and spec.origin is not None:
        csv = Path(spec.origin).parent / "data" / "diamonds.csv"
        return csv if csv.is_file() else None
    return None


@pytest.mark.skipif(_diamonds_source() is None, reason="no plotnine wheel or diamonds.csv at hand (PCOR_SQL_DIAMONDS_SOURCE)")
def test_converting_diamonds_gives_the_shipped_table():
    script = _script("diamonds")
    table = script.convert(script.csv_bytes(_diamonds_source()))
    assert table.equals(pq.read_table(FOLDER / "diamonds.parquet"))


# --- planted outliers are contextual outliers -------------------------------------------------


def _cell_mask(table, cell: dict[str, str]) -> np.ndarray:
    mask = np.ones(table.num_rows, dtype=bool)
    for column, value in cell.items():
        # Compare dictionary codes, not 100k Python strings per call.
        encoded = table[column].combine_chunks().dictionary_encode()
        labels = encoded.dictionary.to_pylist()
        code = labels.index(value) if value in labels else -1
        mask &= encoded.indices.to_numpy() == code
    return mask


def test_record_42_is_a_nurse_paid_like_a_professor(built):
    table, planted = built["salaries"]
    (p42,) = [p for p in planted if p["id"] == 42]
    assert p42["cell"] == {"job_title": "Registered Nurse", "employer": "University Health Network", "year": "2018"}
    salary = table["salary"].to_numpy()
    row = 41  # ids are 1..N in row order
    assert table["id"][row].as_py() == 42
    v = salary[row]
    cell = _cell_mask(table, p42["cell"])
    members = np.flatnonzero(cell)
    assert members.size > 500
    assert grubbs_outlier(salary[cell], v)
    assert lof_1d(salary[cell], int(np.flatnonzero(members == row)[0])) > 1.5
    # Ordinary in the whole table, by both verifiers.
    assert not grubbs_outlier(salary, v)
    assert lof_1d(salary, row) < 1.5
    # "Paid like a professor": within the professors' middle half that year.
    profs = salary[_cell_mask(table, {"job_title": "Professor", "year": "2018"})]
    q1, q3 = np.percentile(profs, [25, 75])
    assert q1 <= v <= 1.5 * q3


@pytest.mark.parametrize("name", list(METRIC))
def test_every_planted_record_is_a_contextual_outlier(built, name):
    table, planted = built[name]
    metric = table[METRIC[name]].to_numpy().astype(np.float64)
    assert len(planted) >= 24
    cells = {tuple(sorted(p["cell"].items())) for p in planted}
    assert len(cells) == len(planted), "two planted records share a cell and could mask each other"
    for p in planted:
        row = p["id"] - 1
        v = metric[row]
        cell = _cell_mask(table, p["cell"])
        assert cell[row]
        members = np.flatnonzero(cell)
        assert grubbs_outlier(metric[cell], v), p
        assert lof_1d(metric[cell], int(np.flatnonzero(members == row)[0])) > 1.5, p
        assert not grubbs_outlier(metric, v), p
