"""The service under maximal requests (DESIGN.md §8 "Bounded work"): how long a light
request of one analyst takes while `heavy` other analysts keep maximal requests running.

On the service benchmark's file, after its load: the owner raises the table's limits and adds
`heavy` analysts and one light analyst, then serves again (`pcor-sql serve --workers W`). Each
heavy analyst sends, in a loop, the most work an analyst may ask for — BFS with samples and
descents at their declared maxima (1,000,000 and 100,000), Grubbs — which the service's work cap
(`--max-work`, its default) ends with the generic 422. The light analyst sends `light` Grubbs
explain requests one after another, first with nobody else on the service (the reference, in the
same run and the same process), then while the heavy requests run.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

MAXIMAL = {"verifier": "grubbs", "search": "bfs", "samples": 1_000_000, "descents": 100_000}
EPSILON = 0.01


def run_heavy(db: Path, workers: int, heavy: int, light: int, table: str, key: int,
              report: Callable[[str], None] = lambda _m: None, searches: str = "processes") -> dict[str, Any]:
    import duckdb

    import pcor_sql
    from benchmarks.service_process import served

    con = duckdb.connect(str(db))
    try:
        owner = pcor_sql.Owner(con)
        for notion in ("ocdp", "dp", "sp"):
            owner.set_limit(table, owner.spent(table, notion) + 10_000.0, notion)
        stamp = int(time.time())
        tokens = {f"heavy{i}_{stamp}": owner.add_analyst(f"heavy{i}_{stamp}", quota=1000.0) for i in range(heavy)}
        light_token = owner.add_analyst(f"light_{stamp}", quota=1000.0)
    finally:
        con.close()
    report(f"serving again: {heavy} analysts with maximal requests, one light analyst")
    with served(db, args=["--workers", str(workers), "--searches", searches]) as service:
        alone = _light(service.url, light_token, light, table, key)
        stop = threading.Event()
        statuses: list[Any] = []
        lock = threading.Lock()

        def maximal(token: str) -> None:
            with pcor_sql.connect(service.url, token, timeout=600) as handle:
                while not stop.is_set():
                    try:
                        handle.explain_outliers(table, [key], epsilon=EPSILON, **MAXIMAL)
                        status: Any = 200
                    except pcor_sql.errors.PcorError as exc:
                        status = getattr(exc, "status_code", "connection")
                    with lock:
                        statuses.append(status)

        threads = [threading.Thread(target=maximal, args=(t,), daemon=True) for t in tokens.values()]
        for t in threads:
            t.start()
        time.sleep(2.0)  # the maximal requests are running (and queued) before the light ones start
        loaded = _light(service.url, light_token, light, table, key)
        stop.set()
        for t in threads:
            t.join(timeout=600)
    counts: dict[str, int] = {}
    for s in statuses:
        counts[str(s)] = counts.get(str(s), 0) + 1
    return {"heavy": heavy, "light": light, "workers": workers, "alone": alone, "loaded": loaded,
            "heavy_statuses": counts}


def _light(url: str, token: str, count: int, table: str, key: int) -> list[dict[str, Any]]:
    import pcor_sql

    out = []
    with pcor_sql.connect(url, token, timeout=600) as handle:
        for _ in range(count):
            started = time.perf_counter()
            try:
                handle.explain_outliers(table, [key], epsilon=EPSILON, verifier="grubbs")
                status: Any = 200
            except pcor_sql.errors.PcorError as exc:
                status = getattr(exc, "status_code", "connection")
            out.append({"status": status, "seconds": time.perf_counter() - started})
    return out


def heavy_table(result: dict[str, Any]) -> Any:
    from benchmarks.service_load import percentile
    from benchmarks.tables import make_table, seconds

    def row(label: str, records: list[dict[str, Any]]) -> tuple[str, ...]:
        xs = sorted(r["seconds"] for r in records)
        ok = sum(1 for r in records if r["status"] == 200)
        return (label, f"{ok} of {len(xs)}", seconds(percentile(xs, 0.5)), seconds(percentile(xs, 0.95)),
                seconds(xs[-1]))

    alone = percentile(sorted(r["seconds"] for r in result["alone"]), 0.5)
    loaded = percentile(sorted(r["seconds"] for r in result["loaded"]), 0.5)
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(result["heavy_statuses"].items()))
    return make_table(
        f"A light request while {result['heavy']} maximal requests run (service --workers {result['workers']}, "
        "default --max-work)",
        ("light requests (Grubbs explain, 1 key)", "answered", "p50", "p95", "max"),
        [row("alone on the service (reference, same run)", result["alone"]),
         row(f"while {result['heavy']} analysts send maximal requests", result["loaded"])],
        (f"p50 under load / p50 alone: {loaded / alone:.2f}×." if alone and loaded else "",
         "Maximal: BFS with samples = 1,000,000 and descents = 100,000 (the declared maxima), Grubbs; each ends at "
         f"the work cap with the generic 422. Their responses: {statuses}.",
         "Each heavy analyst is a separate token (one analyst alone can never hold more than workers − 1 workers)."),
    )
