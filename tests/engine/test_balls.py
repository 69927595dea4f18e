"""Ball counts agree exactly with a brute-force O(N²) count (the reference float expressions)."""

from __future__ import annotations

import statistics
import time

import duckdb
import numpy as np
import pytest

from pcor_sql.engine.balls import _ball_strips, ball_counts, load_points, relation_ball_counts
from pcor_sql.errors import UserError


def within(data: np.ndarray, q: np.ndarray, r: float, norm: str) -> np.ndarray:
    """The reference predicate d(q, x_j) ≤ r for every data row (sums left to right)."""
    diff = q[None, :] - data
    if data.shape[1] == 1:
        dist = np.abs(diff[:, 0])
    elif norm == "l1":
        dist = np.abs(diff[:, 0])
        for c in range(1, data.shape[1]):
            dist = dist + np.abs(diff[:, c])
    elif norm == "l2":
        acc = diff[:, 0] * diff[:, 0]
        for c in range(1, data.shape[1]):
            acc = acc + diff[:, c] * diff[:, c]
        dist = np.sqrt(acc)
    else:
        dist = np.abs(diff).max(axis=1)
    return dist <= r


def brute_force(data, queries, r: float, norm: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.asarray(data, dtype=np.float64).reshape(len(data), -1)
    queries = np.asarray(queries, dtype=np.float64).reshape(len(queries), -1)
    ball = np.array([np.count_nonzero(within(data, q, r, norm)) for q in queries])
    mult = np.array([np.count_nonzero(np.all(data == q, axis=1)) for q in queries])
    return mult, ball


@pytest.fixture()
def con():
    c = duckdb.connect()
    yield c
    c.close()


def _tied(rng: np.random.Generator, n: int, d: int, step: float) -> np.ndarray:
    """Values on a coarse lattice (many ties, many distances exactly equal to r) plus jitter."""
    lattice = rng.integers(0, 12, size=(n, d)) * step
    jitter = np.where(rng.random((n, d)) < 0.2, rng.normal(0, step, (n, d)), 0.0)
    return lattice + jitter


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("step", [1.0, 0.1])
def test_agrees_with_brute_force(d, norm, step):
    rng = np.random.default_rng(17 * d + int(step * 10))
    data = _tied(rng, 400, d, step)
    queries = np.concatenate([data[:150], _tied(rng, 30, d, step)])  # some queries not in the data
    for r in (0.0, step, 2 * step, 3.0 * step, 0.3, 2.5 * step, 100.0):
        got = ball_counts(data, queries, r, norm)
        mult, ball = brute_force(data, queries, r, norm)
        np.testing.assert_array_equal(got.multiplicity, mult, err_msg=f"r={r}")
        np.testing.assert_array_equal(got.ball, ball, err_msg=f"r={r}")


@pytest.mark.parametrize("refinement", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_every_refinement_agrees_with_brute_force(norm, refinement):
    """Whole runs (counted by cumulative weight) and the shell (checked pair by pair) add up exactly."""
    rng = np.random.default_rng(refinement)
    for d, step in ((2, 1.0), (2, 0.1), (3, 1.0)):
        data = np.unique(_tied(rng, 500, d, step), axis=0)
        weights = rng.integers(1, 4, data.shape[0])
        queries = np.concatenate([data[::3], _tied(rng, 20, d, step)])
        for r in (step, 2.5 * step, 4 * step, 0.3):
            got = _ball_strips(data, weights, queries, r, norm, refinement=refinement)
            expected = [int(weights[within(data, q, r, norm)].sum()) for q in queries]
            np.testing.assert_array_equal(got, expected, err_msg=f"d={d} step={step} r={r}")


def test_float_boundaries_on_decimal_grid():
    """0.1-steps: many differences round to just below or above r = 0.3 (the fix-up's job)."""
    data = np.round(np.arange(0, 5, 0.1), 10)
    data = np.concatenate([data, data[::3], -data])
    for r in (0.1, 0.2, 0.3, 0.7, 1.1):
        got = ball_counts(data, data, r, "l2")
        mult, ball = brute_force(data, data, r, "l2")
        np.testing.assert_array_equal(got.ball, ball, err_msg=f"r={r}")
        np.testing.assert_array_equal(got.multiplicity, mult)
        two = np.stack([data, data[::-1]], axis=1)
        for norm in ("l1", "l2", "linf"):
            g2 = ball_counts(two, two, r, norm)
            np.testing.assert_array_equal(g2.ball, brute_force(two, two, r, norm)[1], err_msg=f"{norm} r={r}")


@pytest.mark.parametrize(
    "name",
    ["huge offset", "tiny", "mixed scale", "identical", "negatives", "subnormal differences"],
)
def test_extreme_scales_agree_with_brute_force(name):
    """The margins are relative to the data's scale and r: exact far from unit magnitudes too."""
    rng = np.random.default_rng(0)
    base = rng.integers(-5, 5, (200, 2)).astype(float)
    data, radii = {
        "huge offset": (base * 1e-3 + 1e12, [0, 1e-3, 2e-3, 0.5]),
        "tiny": (base * 1e-200, [0, 1e-200, 3e-200]),
        "mixed scale": (np.stack([base[:, 0] * 1e9, base[:, 1] * 1e-9], 1), [0, 1e-9, 1e9, 2e9]),
        "identical": (np.ones((50, 3)), [0, 1]),
        "negatives": (-np.abs(rng.normal(0, 1, (200, 3))).round(1), [0, 0.1, 0.3, 1.0]),
        "subnormal differences": (np.stack([np.full(100, 1e-300), np.arange(100) * 1e-310], 1), [0, 1e-309, 1e-308]),
    }[name]
    up, weights = np.unique(data, axis=0, return_counts=True)
    for r in radii:
        for norm in ("l1", "l2", "linf"):
            want = [np.count_nonzero(within(data, q, r, norm)) for q in data]
            np.testing.assert_array_equal(ball_counts(data, data, r, norm).ball, want, err_msg=f"{r} {norm}")
            for c in (1, 3, 8):
                got = _ball_strips(up, weights, up, r, norm, refinement=c)
                np.testing.assert_array_equal(got, [weights[within(up, q, r, norm)].sum() for q in up])


def test_signed_zero_is_one_value():
    got = ball_counts([0.0, -0.0, 1.0], [-0.0], 0.0, "l1")
    assert got.multiplicity.tolist() == [2] and got.ball.tolist() == [2]


def _table(con, name: str, cols: dict[str, np.ndarray]) -> None:
    import pyarrow as pa

    con.register(f"{name}_src", pa.table(cols))
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_src")
    con.unregister(f"{name}_src")


def test_relation_counts_with_selector(con):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 50, 1000)
    y = rng.integers(0, 50, 1000).astype(float)
    _table(con, "pts", {"id": np.arange(1000), "x": x, "y y": y})
    pts = load_points(con, "pts", ["x", "y y"], "id % 7 = 3")
    assert pts.selected.tolist() == [i for i in range(1000) if i % 7 == 3]
    assert pts.records[0] == {"id": 3, "x": int(x[3]), "y y": float(y[3])}
    got = relation_ball_counts(pts, 4.0, "linf")
    mult, ball = brute_force(np.stack([x, y], 1), np.stack([x, y], 1)[pts.selected], 4.0, "linf")
    np.testing.assert_array_equal(got.ball, ball)
    np.testing.assert_array_equal(got.multiplicity, mult)


def test_input_errors(con):
    con.execute("CREATE TABLE t AS SELECT i AS a, i::VARCHAR AS s, CASE WHEN i = 3 THEN NULL ELSE i END AS n, "
                "CASE WHEN i = 4 THEN 'nan'::DOUBLE ELSE i END AS f, i > 2 AS b FROM range(10) r(i)")
    cases = [
        (["s"], None, "'s' has type VARCHAR"),
        (["b"], None, "'b' has type BOOLEAN"),
        (["n"], None, "'n' has 1 NULL"),
        (["f"], None, "'f' has 1 NaN"),
        (["nope"], None, "cannot read columns"),
        (["a"], "a > 100", "matches no rows"),
        (["a"], "a >", "not a valid condition"),
        ([], None, "no columns"),
        (["a", "a"], None, "twice"),
    ]
    for cols, sel, needle in cases:
        with pytest.raises(UserError) as err:
            load_points(con, "t", cols, sel)
        assert needle in str(err.value), str(err.value)
        assert " — " in str(err.value)
    with pytest.raises(UserError, match="norm"):
        ball_counts([1.0], [1.0], 1.0, "manhattan")
    with pytest.raises(UserError, match="radius"):
        ball_counts([1.0], [1.0], -1.0, "l1")
    with pytest.raises(UserError, match="empty"):
        load_points(con, "(SELECT * FROM t WHERE false)", ["a"], None)


def test_batch_over_110k_rows_takes_seconds(con):
    """Every record of a 110k-row table with tie-heavy integer columns (guard: 10 s each, median of 3;
    the benchmark script measures denser continuous data)."""
    rng = np.random.default_rng(0)
    n = 110_000
    age = np.clip(rng.normal(33, 15, n).round(), 0, 99)
    other = np.clip(rng.normal(30, 12, n).round(), 0, 99)
    _table(con, "big", {"age": age, "other": other})
    for cols, r in ((["age"], 2.0), (["age", "other"], 3.0)):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            pts = load_points(con, "big", cols, None)
            res = relation_ball_counts(pts, r, "l2")
            times.append(time.perf_counter() - t0)
        assert res.ball.shape == (n,) and np.all(res.ball >= res.multiplicity)
        assert statistics.median(times) < 10.0, (cols, times)


def test_records_convert_like_to_pylist():
    """The fast row conversion gives the same values and types as pyarrow's to_pylist."""
    from pcor_sql.engine.balls import _rows_as_dicts

    c = duckdb.connect()
    c.execute("CREATE TYPE mood AS ENUM ('a', 'b')")
    table = c.sql(
        "SELECT i::INTEGER a, i::DOUBLE b, (i % 2 = 0) c, CASE WHEN i = 1 THEN NULL ELSE i END d, 'x' || i e, "
        "(CASE WHEN i = 2 THEN NULL ELSE 'a' END)::mood f, i::DECIMAL(5, 1) g, i::FLOAT h, "
        "DATE '2020-01-01' + i::INTEGER dt, i::HUGEINT hu, i::UTINYINT ut FROM range(4) r(i)"
    ).to_arrow_table()
    c.close()
    fast, slow = _rows_as_dicts(table), tuple(table.to_pylist())
    assert fast == slow
    assert all([type(v) for v in f.values()] == [type(v) for v in s.values()] for f, s in zip(fast, slow))
