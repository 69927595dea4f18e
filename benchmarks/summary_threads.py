"""The per-cell summary's build time with DuckDB's `threads` = 1 and 2, alternating (issue 29,
item 4: measure before parallelising the build).

    PYTHONPATH=. python -m benchmarks.summary_threads [/tmp/pcor-scale/base-1000000.duckdb]

The table is the one `python -m benchmarks batch` generates (the scale benchmark's `base` shape).
"""

from __future__ import annotations

import os
import statistics
import sys
import warnings


def main(path: str, repeats: int = 6) -> None:
    import duckdb

    import pcor_sql

    warnings.simplefilter("ignore")
    con = duckdb.connect(path)
    con.execute("SET enable_progress_bar = false")
    request = pcor_sql.outlier_request(con, "SELECT v FROM t WHERE id = 0", verifier="lof")
    times: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(repeats):
        for threads in times:
            con.execute(f"SET threads = {threads}")
            session = pcor_sql.Session(con, allow_seeded=True)
            times[threads].append(session.prepare(request).summary.build_seconds)
    print({t: [round(x, 3) for x in v] for t, v in times.items()})
    print("median", {t: round(statistics.median(v), 3) for t, v in times.items()}, "load", os.getloadavg())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pcor-scale/base-1000000.duckdb")
