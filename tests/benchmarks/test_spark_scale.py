"""`python -m benchmarks spark-scale` without Spark: the generated table's shape and the
command's option errors (the run itself needs Spark and a large file: see BENCHMARKS.md)."""

from __future__ import annotations

import duckdb

from benchmarks.spark_scale import DOMAINS, RECORD_ID, generate
from tests.benchmarks.app_helpers import assert_error, invoke as run


def test_the_table_has_1200_cells_and_a_contextual_outlier(tmp_path):
    path = tmp_path / "t.parquet"
    generate(path, 24_000)
    con = duckdb.connect()
    rel = f"read_parquet('{path}')"
    assert con.execute(f"SELECT count(*), count(DISTINCT (state, product, channel)) FROM {rel}").fetchall() == [(24_000, 1200)]
    for column, values in DOMAINS.items():
        assert sorted(r[0] for r in con.execute(f"SELECT DISTINCT {column} FROM {rel}").fetchall()) == values
    # Record 42 lies 40 above its cell's level; every other row of the cell within ±10 of it.
    (v, lo, hi), = con.execute(
        f"SELECT (SELECT amount FROM {rel} WHERE id = {RECORD_ID}), min(amount), max(amount) FROM {rel} "
        f"WHERE (state, product, channel) = (SELECT (state, product, channel) FROM {rel} WHERE id = {RECORD_ID}) "
        f"AND id <> {RECORD_ID}").fetchall()
    assert v - hi > 25 and hi - lo <= 20
    assert generate(path, 24_000) == 0.0  # made once, reused


def test_it_needs_two_sizes():
    assert_error(run("spark-scale", "--rows", "1000000"), "two sizes")
    assert_error(run("spark-scale", "--rows", "10,x"), "integers")
