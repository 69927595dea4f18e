"""One release on a large Parquet file, on DuckDB and on Spark, with the rows Spark sent back.

The file is made by DuckDB SQL (not timed): `rows` rows in 1,200 cells — state (50) × product
(6) × channel (4), the issue's shape — with `amount` = a per-cell level + noise in [−10, 10]
from `hash(id)` (deterministic), rounded to cents (`--values fine`: on the noise's 0.001 grid,
few ties); record 42 is planted 40 above its cell's level, a contextual outlier that is
unremarkable in the whole table.

Each engine gets a fresh Session (the summary is built inside the timed call) and runs one
seeded `explain_outlier` through the public API, next to Spark's own sort of the metric (the
yardstick a Spark release is divided by: `ORDER BY amount` run to the end into Spark's no-op
sink, so nothing reaches the driver), each with the 1-minute load read before it, the file read as `read_parquet('…')` on
DuckDB and `parquet.`…`` on Spark. For Spark the rows the driver received (`rows_pulled` of
the session's data access: the record, the per-cell summary, the windows) are reported: they
must not depend on the table's size, so the command runs at two sizes or more.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

STATES, PRODUCTS, CHANNELS = 50, 6, 4
DOMAINS = {
    "state": [f"s{i:02d}" for i in range(STATES)],
    "product": [f"p{i}" for i in range(PRODUCTS)],
    "channel": [f"c{i}" for i in range(CHANNELS)],
}
RECORD_ID = 42


#: How `amount` is written: `cents` rounds it to 0.01 (~4 copies of each value per cell at 10M
#: rows: tie-heavy, as money is), `fine` keeps the noise's 0.001 grid (few ties).
VALUES = ("cents", "fine")


def generation_sql(rows: int, path: Path, values: str = "cents") -> str:
    rows = int(rows)
    level = "(50 + 3 * (i % 50) + 11 * ((i // 50) % 6) + 7 * ((i // 300) % 4))"
    noise = "(CAST(hash(i) % 20001 AS DOUBLE) / 1000 - 10)"
    amount = f"CASE WHEN i = {RECORD_ID} THEN {level} + 40 ELSE {level} + {noise} END"
    return (
        "COPY (SELECT i AS id, 's' || lpad(CAST(i % 50 AS VARCHAR), 2, '0') AS state, "
        "'p' || CAST((i // 50) % 6 AS VARCHAR) AS product, 'c' || CAST((i // 300) % 4 AS VARCHAR) AS channel, "
        f"{f'round({amount}, 2)' if values == 'cents' else amount} AS amount "
        f"FROM range({rows}) t(i)) TO '{path}' (FORMAT parquet)"
    )


def table_file(directory: Path, rows: int, values: str = "cents") -> Path:
    return directory / (f"pcor_spark_{rows}.parquet" if values == "cents" else f"pcor_spark_{values}_{rows}.parquet")


def generate(path: Path, rows: int, values: str = "cents") -> float:
    """Write the file unless it is there already; returns the seconds spent."""
    import duckdb

    if path.exists():
        return 0.0
    started = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.parquet")
    con = duckdb.connect()
    try:
        con.execute(generation_sql(rows, tmp, values))
    finally:
        con.close()
    tmp.rename(path)
    return time.perf_counter() - started


def release_duckdb(path: Path, verifier: str, seed: int) -> dict[str, Any]:
    import duckdb

    import pcor_sql

    con = duckdb.connect()
    try:
        started = time.perf_counter()
        r = pcor_sql.explain_outlier(con, f"SELECT amount FROM read_parquet('{path}') WHERE id = {RECORD_ID}",
                                     domains=DOMAINS, verifier=verifier, epsilon=0.2, seed=seed)
        return {"seconds": time.perf_counter() - started, "context": r.context, "em_calls": r.em_calls}
    finally:
        con.close()


def release_spark(spark: Any, path: Path, verifier: str, seed: int) -> dict[str, Any]:
    import pcor_sql

    session = pcor_sql.Session(spark, ledger=":memory:")  # seeded: an in-memory ledger, as on DuckDB
    started = time.perf_counter()
    r = pcor_sql.explain_outlier(None, f"SELECT amount FROM parquet.`{path}` WHERE id = {RECORD_ID}",
                                 session=session, domains=DOMAINS, verifier=verifier, epsilon=0.2, seed=seed)
    return {"seconds": time.perf_counter() - started, "context": r.context, "em_calls": r.em_calls,
            "rows_pulled": session.access.rows_pulled, "queries": session.access.queries}


def spark_sort(spark: Any, path: Path) -> float:
    """Seconds Spark takes to sort the metric of the file (every row, into the no-op sink)."""
    started = time.perf_counter()
    spark.sql(f"SELECT amount FROM parquet.`{path}` ORDER BY amount").write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def start_spark(master: str) -> tuple[Any, float]:
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master(master).appName("pcor-sql-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8").config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    return spark, time.perf_counter() - started


def run(sizes: Sequence[int], verifiers: Sequence[str], directory: Path, master: str, seed: int,
        report: Callable[[str], None], values: str = "cents") -> dict[str, Any]:
    from benchmarks.measure import load_average, machine

    started_at = time.strftime("%Y-%m-%d %H:%M:%S")
    wall = time.perf_counter()
    load_start = load_average()
    files = {}
    for rows in sizes:
        path = table_file(directory, rows, values)
        report(f"generating {rows:,} rows into {path} (skipped if present)")
        files[rows] = (path, generate(path, rows, values))
    report(f"starting Spark on {master}")
    spark, spark_start = start_spark(master)
    from benchmarks.scale_measure import load_now

    runs = []
    for rows in sizes:
        path, gen_s = files[rows]
        for verifier in verifiers:
            report(f"{rows:,} rows, {verifier}: DuckDB")
            duck = {**release_duckdb(path, verifier, seed), "load": load_now()}
            report(f"{rows:,} rows: Spark's own sort of the metric")
            sort = {"load": load_now(), "seconds": spark_sort(spark, path)}
            report(f"{rows:,} rows, {verifier}: Spark {master}")
            sp = {"load": load_now(), **release_spark(spark, path, verifier, seed)}
            runs.append({"rows": rows, "verifier": verifier, "duckdb": duck, "spark": sp, "spark_sort": sort,
                         "generation_s": gen_s, "same_context": duck["context"] == sp["context"]})
    return {"started": started_at, "machine": machine(), "wall_s": time.perf_counter() - wall,
            "load": {"start": load_start, "end": load_average()}, "master": master, "spark_start_s": spark_start,
            "values": values, "runs": runs}
