"""The large-table benchmark: one release on a table of millions of rows shaped like `salaries`.

Two fresh Python processes, so that the memory figure is the release's alone:
1. `generate` loads `salaries` into a DuckDB database file and builds `salaries_big` from it
   in SQL: replica r of row id gets id r·51,000 + id and, for r > 0, its salary times
   1 + δ with δ ∈ [−1 %, +1 %] taken from `hash(id, r)` (deterministic, no random state);
   replica 0 is `salaries` itself, so record 42 is the planted outlier, unchanged. The
   columns keep the ENUM types of `salaries`. Generation is not timed.
2. `measure` opens that file, and for each repeat times, with a new `Session` (so the per-cell
   summary is rebuilt every time): the end-to-end `explain_outlier` (parse, schema, summary
   build, record lookup, start search, search, ledger charge) and, separately, the engine
   alone: the summary build (`build_seconds` of `Session.prepare`) + `OutlierRun.release`.
   Peak memory is the process's peak resident set size (`measure.peak_rss_bytes`: VmHWM): the
   interpreter, numpy, DuckDB's buffer pool and every array the release built.

Run as `python -m benchmarks.bigtable generate|measure ...`; results go to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

SALARIES_ROWS = 51_000
TABLE = "salaries_big"
RECORD_ID = 42


def generation_sql(rows: int) -> str:
    """The CREATE TABLE statement of the large table (`rows` is a validated int)."""
    rows = int(rows)
    replicas = -(-rows // SALARIES_ROWS)
    return (
        f"CREATE OR REPLACE TABLE {TABLE} AS "
        f"SELECT r.range * {SALARIES_ROWS} + s.id AS id, s.job_title, s.employer, s.year, "
        f"CASE WHEN r.range = 0 THEN s.salary "
        f"ELSE round(s.salary * (1 + (CAST(hash(s.id, r.range) % 2001 AS DOUBLE) - 1000) / 100000), 2) END AS salary "
        f"FROM salaries s, range({replicas}) r "
        f"WHERE r.range * {SALARIES_ROWS} + s.id <= {rows}"
    )


def generate(db_path: Path, rows: int) -> dict[str, Any]:
    import duckdb

    import pcor_sql

    started = time.perf_counter()
    con = duckdb.connect(str(db_path))
    try:
        pcor_sql.load_dataset(con, "salaries", replace=True)
        con.execute(generation_sql(rows))
        n = con.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0]
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return {"rows": int(n), "generation_s": time.perf_counter() - started, "db_bytes": db_path.stat().st_size}


def measure(db_path: Path, repeats: int, seed: int) -> dict[str, Any]:
    import duckdb
    import numpy as np

    import pcor_sql
    from benchmarks.measure import peak_rss_bytes

    rss_after_imports = peak_rss_bytes()
    con = duckdb.connect(str(db_path))
    query = f"SELECT salary FROM {TABLE} WHERE id = {RECORD_ID}"
    end_to_end, engine, summary_s, populations = [], [], [], []
    try:
        request = pcor_sql.outlier_request(con, query, search="bfs", verifier="grubbs", epsilon=0.2, samples=50,
                                           accounting="tight")
        for i in range(repeats):
            t0 = time.perf_counter()
            r = pcor_sql.explain_outlier(con, query, search="bfs", verifier="grubbs", epsilon=0.2, seed=seed + i,
                                         session=pcor_sql.Session(con, allow_seeded=True), owner_view=True)
            end_to_end.append(time.perf_counter() - t0)
            populations.append(r.owner.population)
            run = pcor_sql.Session(con).prepare(request)  # schema, record lookup and a new summary
            t1 = time.perf_counter()
            run.release(0, np.random.default_rng(seed + i))
            t2 = time.perf_counter()
            engine.append(run.summary.build_seconds + (t2 - t1))
            summary_s.append(run.summary.build_seconds)
        rows = con.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0]
    finally:
        con.close()
    return {
        "rows": int(rows),
        "end_to_end_s": end_to_end,
        "engine_s": engine,
        "summary_build_s": summary_s,
        "released_population": populations,
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_after_imports_bytes": rss_after_imports,
        "memory_method": "peak resident set size of a fresh Python process (VmHWM in /proc/self/status; "
        "getrusage ru_maxrss where there is no /proc), covering the interpreter, imports, DuckDB's buffer pool "
        "and every array of the release",
    }


def run_big(
    workdir: Path,
    rows: int,
    repeats: int,
    seed: int,
    report: Callable[[str], None] = lambda _msg: None,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Generate, then measure, each in its own fresh Python process; the two result dicts."""
    db = workdir / "salaries_big.duckdb"
    out_gen, out_measure = workdir / "generate.json", workdir / "measure.json"
    report(f"10M-row table: generating {rows:,} rows in {db} (not timed)")
    _child(["generate", "--db", str(db), "--rows", str(rows), "--out", str(out_gen)], timeout_s)
    gen = json.loads(out_gen.read_text())
    report(f"10M-row table: measuring bfs+grubbs in a fresh process ({repeats} repeat(s))")
    _child(["measure", "--db", str(db), "--repeats", str(repeats), "--seed", str(seed), "--out", str(out_measure)],
           timeout_s)
    res = json.loads(out_measure.read_text())
    for path in (db, db.with_name(db.name + ".wal")):
        if path.exists():
            path.unlink()
    return {"generation": gen, **res}


def _child(args: list[str], timeout_s: float) -> None:
    import benchmarks
    import pcor_sql

    # The child must import these very copies of benchmarks and pcor_sql, installed or not.
    roots = dict.fromkeys(str(Path(m.__file__).resolve().parents[1]) for m in (benchmarks, pcor_sql))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*roots, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bigtable", *args],
        capture_output=True, text=True, timeout=timeout_s, env=env,
    )
    if proc.returncode != 0:
        from pcor_sql.errors import InternalError

        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InternalError(f"the large-table benchmark process failed: {tail[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bigtable")
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--db", type=Path, required=True)
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("measure")
    m.add_argument("--db", type=Path, required=True)
    m.add_argument("--repeats", type=int, default=1)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "generate":
        result = generate(args.db, args.rows)
    else:
        result = measure(args.db, args.repeats, args.seed)
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
