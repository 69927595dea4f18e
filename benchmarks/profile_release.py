"""Where one fresh release's time goes on a scale table: cProfile of a seeded BFS release.

    python -m benchmarks profile-release wide500 1000000 grubbs [--top 18]
    python -m benchmarks profile-release flights 300000 grubbs --seeds 3 --no-profile
    python -m benchmarks profile-release births 0 zscore --search uniform --epsilon 0.5 --seeds 1

Generates the table as `python -m benchmarks scale` does (kept under --workdir, /tmp/pcor-scale by default), warms
the imports, then runs seeded fresh releases (seeds 1, 2, ...; a new Session each), each right
after DuckDB's sort of the metric, the first under cProfile unless --no-profile; prints each
one's time, the sort's, their ratio, the 1-minute load, contexts verified and the released
context's sizes, and the profiled one's functions by own time. Run two checkouts alternately
(PYTHONPATH) to compare them in the same minutes.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks profile-release", description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=("base", "wide70", "wide500", "flights", "wide5000", "births"))
    parser.add_argument("rows", type=int)
    parser.add_argument("verifier")
    parser.add_argument("--top", type=int, default=18)
    parser.add_argument("--seeds", type=int, default=2, help="fresh releases, seeds 1..N")
    parser.add_argument("--no-profile", action="store_true", help="time every release, none under cProfile")
    parser.add_argument("--search", default="bfs", help="bfs (n = 50), uniform, explore, ...")
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pcor-scale"),
                        help="where the table is kept (a private one when others benchmark alongside)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the in-memory ledger

    import pcor_sql
    from benchmarks.scale_measure import connect_table, load_now, reference_sort, warm_imports
    from benchmarks.scale_tables import RECORD_QUERY, ensure_table, shape_rows
    from pcor_sql.errors import NoValidContext

    info = ensure_table(args.workdir, args.shape, shape_rows(args.shape, args.rows), print)
    warm_imports()
    con = connect_table(info["path"])
    options = dict(search=args.search, verifier=args.verifier, epsilon=args.epsilon, owner_view=True)
    if args.search == "bfs":
        options["samples"] = 50
    for seed in range(1, args.seeds + 1):
        started = time.perf_counter()
        reference_sort(con)
        ref = time.perf_counter() - started
        load = load_now()
        session = pcor_sql.Session(con, allow_seeded=True)
        profile = cProfile.Profile() if seed == 1 and not args.no_profile else None
        started = time.perf_counter()
        if profile:
            profile.enable()
        try:
            r = pcor_sql.explain_outlier(None, RECORD_QUERY, session=session, seed=seed, **options)
        except NoValidContext as exc:
            r = exc
        if profile:
            profile.disable()
        took = time.perf_counter() - started
        what = (f"contexts verified {r.owner.contexts_verified}, context sizes {sorted(map(len, r.context.values()))}"
                if not isinstance(r, Exception) else f"no valid context: {r}")
        print(f"{args.shape} {args.search} + {args.verifier} seed {seed}: {took:.2f} s, sort {ref:.3f} s, "
              f"{took / ref:.1f}x, load {load}, {what}", flush=True)
        if profile:
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    return 0
