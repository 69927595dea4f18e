"""One release, end to end, timed in isolation — to compare two versions of the code on one machine.

    python benchmarks/timeit_release.py                               # this checkout
    PYTHONPATH=/path/to/old/checkout python benchmarks/timeit_release.py   # another version

Run the two alternately (twice each) and compare the medians: the machine's state drifts more
than a refactor moves a release. Uses only `pcor_sql.explain_outlier` as every version has it.
"""

from __future__ import annotations

import statistics
import time

import duckdb

import pcor_sql

QUERY = "SELECT salary FROM salaries WHERE id = 42"


def main(runs: int = 15) -> None:
    con = duckdb.connect()
    pcor_sql.load_datasets(con)

    def release(seed: int) -> None:
        pcor_sql.explain_outlier(con, QUERY, search="bfs", verifier="grubbs", epsilon=0.2, seed=seed)

    release(0)  # warm-up: parser templates, first ledger tables
    times = []
    for seed in range(1, runs + 1):
        started = time.perf_counter()
        release(seed)
        times.append(time.perf_counter() - started)
    print(f"bfs+grubbs salaries #42 end to end: median {statistics.median(times) * 1e3:.1f} ms, "
          f"min {min(times) * 1e3:.1f} ms over {runs} seeded runs ({pcor_sql.__file__})")


if __name__ == "__main__":
    main()
