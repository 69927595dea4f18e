"""Seeded releases and answers as JSON — to check that a refactor left every output the same.

    python -m benchmarks seeded-outputs > new.json
    python -m benchmarks seeded-outputs --checkout /path/to/old/checkout > old.json
    cmp old.json new.json

With `--checkout` the outputs are computed in a child process that imports `pcor_sql` from that
checkout (this file is run there as a script, so its own folder, not the repository, comes first
on the path).

Covers two planted outliers × every verifier × the sampling searches × both accountings
(released predicate, EM calls, ε1, start source, and the owner's population), a direct search,
and a batch of IDENTIFY ANOMALY answers. Only API every version has is used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks seeded-outputs", description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", help="the checkout whose pcor_sql computes the outputs (default: this one)")
    args = parser.parse_args(argv)
    if args.checkout is None:
        print(json.dumps(outputs()))
        return 0
    env = {**os.environ, "PYTHONPATH": os.path.abspath(args.checkout)}
    return subprocess.run([sys.executable, os.path.abspath(__file__)], env=env).returncode


def outputs() -> list:
    import duckdb

    import pcor_sql

    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    out: list = []
    for rid in (42, 171):
        for verifier in ("grubbs", "lof", "histogram", "zscore"):
            for search in ("uniform", "random-walk", "dfs", "bfs"):
                for accounting in ("tight", "paper"):
                    [r] = pcor_sql.explain_outliers(
                        con, f"SELECT salary FROM salaries WHERE id = {rid}", verifier=verifier, search=search,
                        accounting=accounting, seed=rid + 3, samples=20, owner_view=True,
                    )
                    out.append([rid, verifier, search, accounting, r.predicate, r.em_calls, r.epsilon1,
                                r.start_source, r.owner.population])
    [r] = pcor_sql.explain_outliers(con, "SELECT salary FROM salaries WHERE id = 42", verifier="grubbs",
                                    search="direct", seed=5, by=["job_title", "year"])
    out.append(["direct", r.predicate])
    answers = pcor_sql.sql(con, "IDENTIFY ANOMALY SELECT victim_age FROM homicides WHERE id < 40 "
                                "WITH (beta = 5, radius = 1, epsilon = 0.5, seed = 3)")
    out.extend(["anomaly", a.record["id"], a.anomaly] for a in answers)
    return out


if __name__ == "__main__":
    print(json.dumps(outputs()))
