"""What one child process of `python -m benchmarks scale` measures: fresh and warm releases on
one table, each timed with the 1-minute load read before it, beside DuckDB sorting the metric
into numpy on the same table (the reference every time is divided by). `benchmarks.scale` runs
one such process per case (`python -m benchmarks.scale_measure DB ...`), so that its peak RSS
is its own.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from benchmarks.scale_tables import RECORD_QUERY, REFERENCE_SQL, TABLE

# Each timed list `x_s` has a list `x_load` of the 1-minute load read just before each sample.
TIMED = ("reference_s", "fresh_s", "warm_same_s", "warm_s", "warm_other_s")


def load_now() -> float | None:
    """The 1-minute load average (runnable processes competing for the cores), or None."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def timed_with_load(out: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """Run fn, appending its seconds to out[key] and the load just before it to out[key_load]."""
    out.setdefault(key.removesuffix("_s") + "_load", []).append(load_now())
    started = time.perf_counter()
    result = fn()
    out.setdefault(key, []).append(time.perf_counter() - started)
    return result


def connect_table(path: str):
    import duckdb

    # The file is opened as the database itself (not ATTACHed: a DuckDB file keeps its own budget
    # ledger, and reading it from another connection would open a second account — refused).
    con = duckdb.connect(path)
    con.execute("SET enable_progress_bar = false")
    return con


def reference_sort(con) -> None:
    """DuckDB sorting the metric into numpy: the yardstick every time is divided by."""
    values = con.execute(REFERENCE_SQL).fetchnumpy()["v"]
    del values


def measure(path: str, verifier: str, fresh: int, warm: int, seed: int, reference: int, search: str = "bfs",
            epsilon: float = 0.2, record: int = 0) -> dict[str, Any]:
    """`fresh` releases, each on a new Session (the per-cell summary built inside the timing),
    each preceded by one reference run while there are `reference` runs left; then `warm`
    timed releases on one Session after an untimed first release. All with `search` (BFS by
    default, forced), ε = `epsilon` (0.2), n = the search's default (50 for BFS), seeds seed,
    seed + 1, ...; explain_outlier end to end (parse, schema, record, summary, start, search,
    in-memory ledger charge). A fresh release that ends in NoValidContext (the uniform search
    that finds none) is timed to its error, its outcome noted in `outcomes`. `record`: the id
    of the row explained (0, the planted record, by default)."""
    import pcor_sql
    from benchmarks.measure import peak_rss_bytes
    from benchmarks.scale import other_records

    from pcor_sql.core.verifiers.grubbs import grubbs_critical_one
    from pcor_sql.errors import NoValidContext

    warnings.simplefilter("ignore")  # the in-memory ledger's PrivacyWarning
    warm_imports()
    con = connect_table(path)
    options = dict(search=search, verifier=verifier, epsilon=epsilon, owner_view=True)
    record_query = RECORD_QUERY if record == 0 else f"SELECT v FROM {TABLE} WHERE id = {int(record)}"
    if search == "bfs":
        options["samples"] = 50
    out: dict[str, Any] = {"verifier": verifier, "summary_build_s": [], "contexts_verified": [], "start_checks": [],
                           "warm_contexts_verified": [], "warm_other_contexts_verified": [], "outcomes": []}
    for key in TIMED:
        out[key], out[key.removesuffix("_s") + "_load"] = [], []
    for i in range(max(fresh, reference)):
        if i < reference:
            timed_with_load(out, "reference_s", lambda: reference_sort(con))
        if i < fresh:
            grubbs_critical_one.cache_clear()  # a fresh release computes its Grubbs quantiles anew
            session = pcor_sql.Session(con, allow_seeded=True)
            r = timed_with_load(out, "fresh_s", lambda: _release_or_none(lambda: pcor_sql.explain_outlier(
                None, record_query, session=session, seed=seed + i, **options)))
            out["outcomes"].append("released" if r is not None else "no valid context")
            if r is not None:
                out["contexts_verified"].append(r.owner.contexts_verified)
                out["start_checks"].append(r.owner.start_checks)
            summary = session.prepare(session_request(con, verifier)).summary  # cached: no rebuild
            out["summary_build_s"].append(summary.build_seconds)
            out["summary_bytes"] = summary_bytes(summary)
            out["cells"] = int(summary.count.size)
            del session, summary
    if fresh:
        out["summary_threads_s"] = summary_at_threads(con, verifier, fresh)
    out["peak_rss_after_fresh_bytes"] = peak_rss_bytes()
    if warm:
        # One Session: an untimed release, then (1) the same request again, seed included: every
        # verdict is cached; (2) new seeds: other coins reach other contexts, so only some verdicts
        # are (the verdicts of the releases before accumulate); (3) other records, each released
        # once: the summary is reused, their verdicts are not.
        session = pcor_sql.Session(con, allow_seeded=True)
        pcor_sql.explain_outlier(None, RECORD_QUERY, session=session, seed=seed - 1, **options)
        for i in range(warm):
            timed_with_load(out, "warm_same_s", lambda: pcor_sql.explain_outlier(
                None, RECORD_QUERY, session=session, seed=seed - 1, **options))
        for i in range(warm):
            r = timed_with_load(out, "warm_s", lambda: pcor_sql.explain_outlier(
                None, RECORD_QUERY, session=session, seed=seed + i, **options))
            out["warm_contexts_verified"].append(r.owner.contexts_verified)
        out["other_records"] = other_records(con, warm)
        out["other_records_without_start"] = []
        for i, rid in enumerate(out["other_records"]):
            try:
                r = timed_with_load(out, "warm_other_s", lambda: pcor_sql.explain_outlier(
                    None, f"SELECT v FROM {TABLE} WHERE id = {rid}", session=session, seed=seed + i, **options))
            except NoValidContext:
                # A contextual outlier for one verifier need not be one for another (on the
                # flights shape, LOF finds no valid context of those rows): noted, not timed.
                out["warm_other_load"].pop()
                out["other_records_without_start"].append(rid)
                continue
            out["warm_other_contexts_verified"].append(r.owner.contexts_verified)
    out["rows"] = int(con.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0])
    con.close()
    out["peak_rss_bytes"] = peak_rss_bytes()
    return out


def _release_or_none(release: Callable[[], Any]) -> Any:
    """The release, or None when it ends in NoValidContext (timed all the same)."""
    from pcor_sql.errors import NoValidContext

    try:
        return release()
    except NoValidContext:
        return None


def summary_at_threads(con, verifier: str, repeats: int, threads: tuple[int, ...] = (1, 2)) -> dict[str, list[float]]:
    """The per-cell summary's build seconds on a new Session with DuckDB's `threads` set to 1 and
    2, alternating, `repeats` each (DESIGN.md §10 "Building the summary": the build follows that setting); the
    setting is reset after."""
    import pcor_sql

    out: dict[str, list[float]] = {str(t): [] for t in threads}
    try:
        for _ in range(repeats):
            for t in threads:
                con.execute(f"SET threads = {int(t)}")
                session = pcor_sql.Session(con, allow_seeded=True)
                out[str(t)].append(session.prepare(session_request(con, verifier)).summary.build_seconds)
                del session
    finally:
        con.execute("RESET threads")
    return out


def warm_imports() -> None:
    """One release on a tiny table first: pcor_sql imports its modules lazily, and a Python
    process pays that once (~1 s here), not per release."""
    import duckdb

    import pcor_sql

    con = duckdb.connect()
    con.execute("CREATE TYPE w_t AS ENUM ('a', 'b')")
    con.execute("CREATE TABLE w AS SELECT range AS id, (CASE WHEN range % 2 = 0 THEN 'a' ELSE 'b' END)::w_t AS g, "
                "CASE WHEN range = 0 THEN 1000.0 ELSE range END AS v FROM range(60)")
    pcor_sql.explain_outlier(con, "SELECT v FROM w WHERE id = 0", search="bfs", verifier="lof", epsilon=0.2, seed=0)
    con.close()


def session_request(con, verifier: str):
    import pcor_sql

    return pcor_sql.outlier_request(con, RECORD_QUERY, search="bfs", verifier=verifier, epsilon=0.2)


def summary_bytes(summary) -> int:
    """What the summary holds: the per-cell sorted runs (if read) and the per-cell arrays."""
    cells = sum(a.nbytes for a in (summary.coords, summary.count, summary.s1, summary.s2, summary.vmin, summary.vmax))
    runs = summary._runs.nbytes() if summary._runs is not None else 0
    return int(cells + runs)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_measure")
    parser.add_argument("db")
    parser.add_argument("--verifier", default="lof")
    parser.add_argument("--fresh", type=int, default=3)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--reference", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--search", default="bfs")
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--record", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args.db, args.verifier, args.fresh, args.warm, args.seed, args.reference, args.search,
                     args.epsilon, args.record)
    text = json.dumps(result)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
