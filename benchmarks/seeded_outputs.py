"""Seeded releases and answers as JSON — to check that a refactor left every output the same.

    python benchmarks/seeded_outputs.py > new.json
    PYTHONPATH=/path/to/old/checkout python benchmarks/seeded_outputs.py > old.json
    cmp old.json new.json

Covers two planted outliers × every verifier × the sampling searches × both accountings
(released predicate, EM calls, ε1, start source, and the owner's population), a direct search,
and a batch of IDENTIFY ANOMALY answers. Only API every version has is used.
"""

from __future__ import annotations

import json

import duckdb

import pcor_sql


def outputs() -> list:
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
