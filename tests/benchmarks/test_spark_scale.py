"""`python -m benchmarks spark-scale` without Spark: the generated table's shape and the
command's option errors (the run itself needs Spark and a large file: see BENCHMARKS.md)."""

from __future__ import annotations

import duckdb

from benchmarks.spark_scale import DOMAINS, RECORD_ID, generate
from tests.benchmarks.app_helpers import assert_error, invoke
from tests.benchmarks.app_helpers import invoke as run


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


def test_a_spark_release_is_shown_against_sparks_own_sort_with_the_load(tmp_path):
    import json

    from benchmarks.measure import machine

    def saved_run(rows, sort):
        return {"rows": rows, "verifier": "lof", "same_context": True, "generation_s": 0.0,
                "duckdb": {"seconds": 1.0, "context": {}, "em_calls": 51, "load": 0.5},
                "spark": {"seconds": 12.0, "rows_pulled": 170_000, "queries": 3, "context": {}, "em_calls": 51,
                          "load": 1.3},
                **({"spark_sort": {"seconds": 4.0, "load": 0.7}} if sort else {})}

    saved = {"started": "2026-01-01 00:00:00", "machine": machine(), "wall_s": 1.0, "master": "local[2]",
             "spark_start_s": 9.0, "load": {"start": [0.5, 1, 1], "end": [1.0, 1, 1]},
             "runs": [saved_run(10_000_000, True), saved_run(100_000_000, False)]}
    path = tmp_path / "spark-scale.json"
    path.write_text(json.dumps(saved), encoding="utf-8")
    out = invoke("spark-scale", "--from-json", str(path), "--out-dir", str(tmp_path / "out"))
    assert out.exit_code == 0, out.stderr
    text = (tmp_path / "out" / "spark-scale.md").read_text(encoding="utf-8")
    assert "3.00× of 4.00 s (load 0.7–1.3)" in text
    assert text.count("| — |") >= 1  # the run saved without a sort


def test_cents_amounts_are_rounded_and_fine_ones_are_not(tmp_path):
    # Rounded to cents, a cell of 8,333 rows (10M rows) holds ~4 copies of each of its ~2,000
    # values; on the 0.001 grid, ~20,000 values: few ties.
    from benchmarks.spark_scale import table_file

    con = duckdb.connect()
    off_cents = {}
    for values in ("cents", "fine"):
        path = table_file(tmp_path, 24_000, values)
        generate(path, 24_000, values)
        off_cents[values] = con.execute(
            f"SELECT avg(CASE WHEN round(amount, 2) = amount THEN 0 ELSE 1 END) FROM read_parquet('{path}')").fetchall()[0][0]
    assert off_cents["cents"] == 0 and off_cents["fine"] > 0.8
    assert_error(run("spark-scale", "--rows", "1000,2000", "--values", "coarse"), "--values")
